package invariants

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
)

// Once every call has ended and its body is closed, nothing is held:
// whatever an attempt acquired (a slot of the concurrency limit, a place
// in its waiting room, a breaker's trial, a hedge token, a pacer's count)
// was given back on every path, refusals and panics included.
// checkHeld looks at Stats, then lets a day pass on the bubble's clock
// (past the breaker's OpenFor and any pause a host announced, which is
// clamped to 24 h) and sends each host a probe: a GET that a host with
// nothing held lets through at once. A breaker stuck half-open by a trial
// that was never reported refuses it, as a limiter does whose slots leaked.

// probeAfter is how long checkHeld waits before its probes.
const probeAfter = 25 * time.Hour

// probePath starts the path of a probe, which the upstream answers 200 at
// once.
const probePath = "/probe/"

// isProbe reports whether req is a probe of checkHeld's.
func isProbe(req *http.Request) bool { return strings.HasPrefix(req.URL.Path, probePath) }

func (r *run) checkHeld() {
	for _, st := range r.stats() {
		if st.InFlight != 0 || st.Waiting != 0 {
			r.violate("once every call ended, %s's concurrency limit still has %d attempts in flight and %d waiting", st.Host, st.InFlight, st.Waiting)
		}
		if st.PaceInFlight != 0 {
			r.violate("once every call ended, %s's pacer still counts %d attempts in flight", st.Host, st.PaceInFlight)
		}
		if st.HasHedgeBudget && (st.HedgeTokens < 0 || st.HedgeTokens > 4) {
			r.violate("%s's hedge budget holds %v tokens, outside [0, 4]", st.Host, st.HedgeTokens)
		}
	}
	r.checkHedgeBudget()
	e := r.effective(&callSpec{failAt: -1})
	if e.invalid {
		return // every request fails with ErrInvalidPolicy
	}
	time.Sleep(probeAfter)
	hosts := map[int]bool{}
	for _, c := range r.calls {
		if c.made() {
			hosts[c.spec.host] = true
		}
	}
	for h := range max(r.s.nHosts, 1) {
		if hosts[h] {
			r.probe(h)
		}
	}
}

// probe sends host h a GET, which must get through at once.
func (r *run) probe(h int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := &url.URL{Scheme: "https", Host: hostName(h), Path: probePath + hostName(h)}
	req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: u.Host}).WithContext(ctx)
	before := r.up.probes.Load()
	var resp *http.Response
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the probe panicked: %v", p)
			}
		}()
		resp, err = r.tr.RoundTrip(req)
	}()
	if err == nil {
		resp.Body.Close()
	}
	sent := r.up.probes.Load() - before
	coverage.probes.Add(1)
	switch {
	case err != nil:
		what := "refused"
		switch {
		case errors.Is(err, httpretry.ErrCircuitOpen):
			what = "refused by a breaker stuck half-open (a trial never reported)"
		case errors.Is(err, httpretry.ErrConcurrencyLimit):
			what = "refused by a concurrency limit whose slots are held"
		case errors.Is(err, httpretry.ErrRateLimited):
			what = "refused by a pacer paused for more than a day"
		}
		r.violate("%v after every call ended, a GET to %s was %s: %v", probeAfter, hostName(h), what, safeError(err))
	case resp.StatusCode != http.StatusOK || sent != 1:
		r.violate("%v after every call ended, a GET to %s got %d after %d attempts, want 200 after 1", probeAfter, hostName(h), resp.StatusCode, sent)
	}
}

// checkHedgeBudget checks that no host was sent more hedges than its
// hedge budget allows: it starts with 4 tokens and each request that may
// be hedged earns 0.04 of one. A token taken for a hedge that was then not
// sent is given back, so tokens cannot leak into more hedges than that.
// With a bounded table a host's state, and its budget, may be dropped at
// rest and made anew, full: not checked then.
func (r *run) checkHedgeBudget() {
	if r.s.pol.hedgeDelay == 0 || r.s.hostLimit > 0 {
		return
	}
	hedges, calls := map[string]int{}, map[string]int{}
	for _, c := range r.calls {
		if !c.made() {
			continue
		}
		key := c.spec.hostKey()
		calls[key]++
		c.mu.Lock()
		for _, a := range c.attempts {
			if a.Hedge {
				hedges[key]++
			}
		}
		c.mu.Unlock()
	}
	for key, n := range hedges {
		if limit := 4 + int(math.Ceil(0.04*float64(calls[key]))); n > limit {
			r.violate("%s was sent %d hedges by %d calls: its hedge budget allows %d", key, n, calls[key], limit)
		}
	}
}
