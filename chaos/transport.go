package chaos

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
)

// Transport is an http.RoundTripper that injects faults into the requests
// its Rules select, and passes every other request to Next unchanged.
//
// The zero Transport injects nothing and sends through
// http.DefaultTransport. A Transport is enabled until SetEnabled(false). It
// is safe for concurrent use; do not modify its fields after first use.
type Transport struct {
	// Next sends the requests that no fault answers. Nil means
	// http.DefaultTransport.
	Next http.RoundTripper

	// Rules are tried in order for each request. A rule that matches draws
	// with its Rate; if the draw hits, its Fault handles the request, and
	// a fault that passes the request on hands it to the rules after it.
	Rules []Rule

	// Seed seeds the random source of the draws. Runs that send the same
	// requests in the same order, with the same Seed and Rules, inject the
	// same faults; under concurrency the order, and so the faults, may
	// differ from run to run, but the rates hold. Zero is a seed like any
	// other.
	Seed uint64

	// OnInject, if non-nil, is called each time a rule's fault is about to
	// handle a request, on the request's goroutine. It may count, log or
	// record, but must not modify the request or the rule. Nil means no
	// call.
	OnInject func(req *http.Request, rule *Rule)

	off       atomic.Bool
	once      sync.Once
	mu        sync.Mutex
	rng       *rand.Rand
	hostsOnce sync.Once
	hosts     []hostPattern // Rules[i].Host, read once
}

// SetEnabled turns injection on or off, at once, for every request that
// arrives afterwards; it is safe to call at any time, from any goroutine.
// While disabled, the Transport passes each request straight to Next.
func (t *Transport) SetEnabled(on bool) { t.off.Store(!on) }

// Enabled reports whether injection is on.
func (t *Transport) Enabled() bool { return !t.off.Load() }

// RoundTrip sends req through the rules that select it, and then Next.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.off.Load() || req.URL == nil {
		return t.next().RoundTrip(req) // Next refuses a request without a URL
	}
	return t.from(0, req)
}

// from runs req through Rules[i:] and then Next.
func (t *Transport) from(i int, req *http.Request) (*http.Response, error) {
	hosts := t.hostPatterns()
	for ; i < len(t.Rules); i++ {
		r := &t.Rules[i]
		if r.Fault == nil || !r.matches(req, &hosts[i]) || !t.draw(r.Rate) {
			continue
		}
		if t.OnInject != nil {
			t.OnInject(req, r)
		}
		return r.Fault(req, rest{t, i + 1})
	}
	return t.next().RoundTrip(req)
}

// hostPatterns returns the Host of each rule, read on first use.
func (t *Transport) hostPatterns() []hostPattern {
	t.hostsOnce.Do(func() {
		t.hosts = make([]hostPattern, len(t.Rules))
		for i := range t.Rules {
			t.hosts[i] = newHostPattern(t.Rules[i].Host)
		}
	})
	return t.hosts
}

func (t *Transport) next() http.RoundTripper {
	if t.Next == nil {
		return http.DefaultTransport
	}
	return t.Next
}

// draw reports whether a fault with this rate strikes. Rates of 0 or less
// (and NaN) never do and 1 or more always do, without drawing, so that such
// rules leave the sequence of the others unchanged.
func (t *Transport) draw(rate float64) bool {
	if !(rate > 0) {
		return false
	}
	if rate >= 1 {
		return true
	}
	t.once.Do(func() { t.rng = rand.New(rand.NewPCG(t.Seed, 0)) })
	t.mu.Lock()
	x := t.rng.Float64()
	t.mu.Unlock()
	return x < rate
}

// rest is the rest of the chain after a rule: the rules that follow it,
// then Next.
type rest struct {
	t *Transport
	i int
}

func (r rest) RoundTrip(req *http.Request) (*http.Response, error) { return r.t.from(r.i, req) }
