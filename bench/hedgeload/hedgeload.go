// Package hedgeload measures hedging on real sockets: a loopback server
// with injected latency distributions (the scenarios of issue 14), eight
// clients, and each hedging client side by side: no hedging, httpretry's
// fixed delay, failsafe-go's delay-quantile and fixed-delay hedge
// policies, and a slot for httpretry's adaptive delay. Each run reports
// request latency quantiles, extra requests (attempts the server saw per
// request, minus one) and new connections. cmd/hedgeload runs the
// variants in rounds, each in its own process, in an order turned every
// round.
package hedgeload

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/seedhq/httpretry"
)

// Concurrency is the number of clients sending requests at once.
const Concurrency = 8

// Scenario is a server latency model and how long a run lasts.
type Scenario struct {
	Name string
	// Requests ends a run after this many requests; with Phases, the run
	// lasts as long as they do instead.
	Requests int
	// Phases split a run by time; the model sees which phase it is in.
	Phases []Phase
	// Latency is the server's delay before it answers an attempt that
	// arrives in phase (one of Phases, or ""), when started requests of
	// Requests have been sent.
	Latency func(started int64, total int, phase string) time.Duration
}

// Phase is a stretch of a timed run.
type Phase struct {
	Name string
	Len  time.Duration
}

// Scenarios returns the three scenarios, with their sizes
// multiplied by scale (1: 15,000 requests, or 10 s phases).
func Scenarios(scale float64) []Scenario {
	n := max(int(15_000*scale), 100)
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * scale) }
	ms := time.Millisecond
	return []Scenario{
		{Name: "T1", Requests: n, Latency: func(int64, int, string) time.Duration {
			if rand.Float64() < 0.01 {
				return 200 * ms
			}
			return 2 * ms
		}},
		{Name: "T2", Phases: []Phase{{"before", d(10 * time.Second)}, {"brownout", d(10 * time.Second)}, {"first 2 s after", 2 * time.Second}, {"after", d(8 * time.Second)}},
			Latency: func(_ int64, _ int, phase string) time.Duration {
				if phase == "brownout" {
					return 200 * ms
				}
				return 2 * ms
			}},
		{Name: "T3", Requests: n, Latency: func(started int64, total int, _ string) time.Duration {
			if started > int64(total/2) {
				return 20 * ms
			}
			return 2 * ms
		}},
	}
}

// Variant is a client under test.
type Variant struct {
	Name string
	// New wraps base; nil marks a slot not filled yet.
	New func(base http.RoundTripper) http.RoundTripper
}

// FixedDelay is the fixed hedge delay of the fixed-delay variants: the
// value of the table that worked on T1.
const FixedDelay = 5 * time.Millisecond

// Variants are the clients compared, in their default order.
func Variants() []Variant {
	return []Variant{
		{"none", func(base http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: base} // the default policy: no hedging
		}},
		{"httpretry-fixed", func(base http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: FixedDelay}}}
		}},
		// httpretry-adaptive is filled by the integration of the latency
		// estimator and the hedge budget (issue 14): the default policy
		// with adaptive hedging on and nothing tuned.
		{"httpretry-adaptive", nil},
		{"failsafe-quantile", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 30, 20))
		}},
		{"failsafe-fixed", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, hedgepolicy.NewWithDelay[*http.Response](FixedDelay))
		}},
	}
}

// Stats summarises the requests of a run, or of one phase of it.
type Stats struct {
	Phase          string
	Requests       int
	Attempts       int64 // seen by the server
	Errors         int
	P50, P99, P999 time.Duration
}

// Extra is the share of attempts beyond one per request.
func (s Stats) Extra() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Attempts)/float64(s.Requests) - 1
}

// Result is one run of one variant on one scenario.
type Result struct {
	Variant, Scenario string
	Dials             int64 // new connections
	Total             Stats
	Phases            []Stats `json:",omitempty"`
}

// Run sends the scenario's requests through v from Concurrency clients to
// a fresh loopback server.
func Run(v Variant, sc Scenario) (Result, error) {
	if v.New == nil {
		return Result{}, fmt.Errorf("%s: not implemented yet", v.Name)
	}
	var length time.Duration
	for _, p := range sc.Phases {
		length += p.Len
	}
	var (
		start    = time.Now()        // before the server's goroutines exist, which read it
		end      = start.Add(length) // with no phases, the run ends on its request count
		started  atomic.Int64
		attempts = make([]atomic.Int64, len(sc.Phases)+1)
		total    = sc.Requests
	)
	if total == 0 {
		total = 1 << 62
	}
	phaseAt := func(t time.Time) int {
		since := t.Sub(start)
		for i, p := range sc.Phases {
			if since < p.Len {
				return i
			}
			since -= p.Len
		}
		return len(sc.Phases)
	}
	phaseName := func(i int) string {
		if i < len(sc.Phases) {
			return sc.Phases[i].Name
		}
		return ""
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := phaseAt(time.Now())
		attempts[i].Add(1)
		d := sc.Latency(started.Load(), sc.Requests, phaseName(i))
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			io.WriteString(w, "ok")
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()

	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	base := &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}
	defer base.CloseIdleConnections()
	rt := v.New(base)

	type sample struct {
		phase int
		d     time.Duration
		err   bool
	}
	var (
		mu      sync.Mutex
		samples []sample
		wg      sync.WaitGroup
	)

	for range Concurrency {
		wg.Go(func() {
			var local []sample
			for {
				now := time.Now()
				if (length > 0 && !now.Before(end)) || started.Add(1) > int64(total) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				resp, err := rt.RoundTrip(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
				local = append(local, sample{phaseAt(now), time.Since(now), !ok})
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		})
	}
	wg.Wait()

	res := Result{Variant: v.Name, Scenario: sc.Name, Dials: dials.Load()}
	summarise := func(name string, keep func(sample) bool, attempts int64) Stats {
		s := Stats{Phase: name, Attempts: attempts}
		var ds []time.Duration
		for _, x := range samples {
			if keep(x) {
				s.Requests++
				if x.err {
					s.Errors++
				}
				ds = append(ds, x.d)
			}
		}
		if len(ds) > 0 {
			slices.Sort(ds)
			at := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
			s.P50, s.P99, s.P999 = at(0.5), at(0.99), at(0.999)
		}
		return s
	}
	var all int64
	for i := range attempts {
		all += attempts[i].Load()
	}
	res.Total = summarise("run", func(sample) bool { return true }, all)
	for i, p := range sc.Phases {
		res.Phases = append(res.Phases, summarise(p.Name, func(x sample) bool { return x.phase == i }, attempts[i].Load()))
	}
	return res, nil
}
