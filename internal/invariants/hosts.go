package invariants

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
)

// Hosts. Most scenarios call one host, api.example.com. Some call several
// (api, h1, h2, … .example.com) through a Transport whose table of
// per-host state holds only a few (SetHostLimit), so that state is
// created, kept and dropped under load: the state that protects a host (a
// budget that is not full, a breaker that is not closed or counted
// failures, attempts in flight) must never be dropped for other hosts
// (checkProtection), and past the bound a new host goes without state.
// A call names its host as written in a URL: plain, as an FQDN with its
// trailing dot, in upper case, or with the scheme's port: all one host.

const (
	formPlain = iota
	formDot   // "api.example.com.", an FQDN
	formUpper // "API.Example.COM"
	formPort  // "api.example.com:443"
)

var formNames = []string{"plain", "fqdn", "upper", "port"}

// hostName is the name of host i of a scenario.
func hostName(i int) string {
	if i == 0 {
		return "api.example.com"
	}
	return fmt.Sprintf("h%d.example.com", i)
}

// hostKey is the key of the call's host for per-host state, as
// Attempt.Host and HostStats.Host name it.
func (c *callSpec) hostKey() string { return hostName(c.host) + ":443" }

// authority is the call's host as its URL writes it.
func (c *callSpec) authority() string {
	h := hostName(c.host)
	switch c.form {
	case formDot:
		return h + "."
	case formUpper:
		return strings.ToUpper(h[:1]) + h[1:4] + strings.ToUpper(h[4:])
	case formPort:
		return h + ":443"
	}
	return h
}

// rawURL is the call's URL, with secrets that must never be logged.
func (c *callSpec) rawURL() string {
	sep := []string{"/", "//", "/./"}[c.pathForm]
	return fmt.Sprintf("https://user:PASSWORD@%s/c%d%spay?token=SECRET", c.authority(), c.idx, sep)
}

// hosts draws how many hosts the scenario calls, and the bound on the
// hosts with state; placement must then reach every host.
func (g gen) hosts(s *scenario) int {
	if !g.chance(0.12) {
		return 1
	}
	s.nHosts = 3 + g.r.IntN(3)
	s.hostLimit = 1 + g.r.IntN(3)
	if p := &s.pol; p.placement != 0 && p.placement != 2 { // the others name api.example.com alone
		p.placement = pick(g, 0, 2)
	}
	return 3 + g.r.IntN(4)
}

// nestedSlots is how many calls PrepareRetry may make through the
// Transport in a scenario that draws prepareNested.
const nestedSlots = 3

// nestedCalls draws the calls that PrepareRetry makes through the same
// Transport (a token refresh): GETs, each to the host of the call it
// prepares a retry for, or to another.
func (g gen) nestedCalls(s *scenario) {
	if s.pol.prepare != prepareNested {
		return
	}
	if s.nHosts <= 1 && (s.pol.placement == 0 || s.pol.placement == 2) && g.chance(0.5) {
		s.nHosts = 2 // a token endpoint on a host of its own
	}
	for range nestedSlots {
		c := &callSpec{idx: len(s.calls), method: http.MethodGet, failAt: -1, nested: true,
			host: g.r.IntN(max(s.nHosts, 1)), form: g.weighted(8, 1, 1, 1), inAttempt: g.chance(0.5)}
		c.script = []*outcome{{status: 200, err: -1, stage: stageAnswered}}
		if g.chance(0.3) {
			c.script = append([]*outcome{{status: 503, err: -1, stage: stageAnswered}}, c.script...)
		}
		s.calls = append(s.calls, c)
	}
}

// prepareNestedCall is the PrepareRetry that calls through the Transport
// before each retry, as a token refresh does, while the call whose retry
// it prepares holds nothing (PrepareRetry runs before any admission).
func (r *run) prepareNestedCall(prev httpretry.Attempt, next *http.Request) error {
	r.mu.Lock()
	var c *callRun
	for _, x := range r.calls {
		if x.spec.nested && !x.used {
			c, x.used = x, true
			break
		}
	}
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	// The refresh runs under the context of the retry it prepares, as
	// one written with next.Context() does, or under its caller's.
	outer := r.calls[callOf(next.URL)]
	c.parent = outer.ctx
	if c.spec.inAttempt {
		c.parent = next.Context()
		n, _ := httpretry.AttemptFromContext(next.Context())
		outer.mu.Lock()
		if outer.underAttempt == nil {
			outer.underAttempt = map[int]bool{}
		}
		outer.underAttempt[n] = true
		outer.mu.Unlock()
	}
	// Its context carries the per-request edits of the outer call's: the
	// model applies them to it too.
	c.spec.override = outer.spec.override
	r.do(c)
	return nil
}

// top reports the calls the scenario makes itself, not those PrepareRetry
// makes.
func (r *run) top() []*callRun {
	var out []*callRun
	for _, c := range r.calls {
		if !c.spec.nested {
			out = append(out, c)
		}
	}
	return out
}

// made reports whether call c was made: a nested call's slot may be unused.
func (c *callRun) made() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.req != nil
}

// hostStats returns the Stats entry of host key, if it has one.
func (r *run) hostStats(key string) (flatStats, bool) {
	for _, st := range r.stats() {
		if st.Host == key {
			return st, true
		}
	}
	return flatStats{}, false
}

// quiet is what a host's state held when its last call ended with no
// other call of it in flight.
type quiet struct {
	at    time.Time
	st    flatStats
	found bool
}

// began and ended track the calls of each host in flight, to take the
// host's state at each quiet point.
func (r *run) began(c *callRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active == nil {
		r.active, r.quiets, r.begun = map[string]int{}, map[string]quiet{}, map[string]int{}
	}
	r.active[c.spec.hostKey()]++
	r.begun[c.spec.hostKey()]++
}

func (r *run) ended(c *callRun) {
	key := c.spec.hostKey()
	r.mu.Lock()
	r.active[key]--
	last, begun := r.active[key] == 0, r.begun[key]
	r.mu.Unlock()
	if !last {
		return
	}
	st, found := r.hostStats(key)
	r.mu.Lock()
	// A call of the host that began while the state was read makes this
	// no quiet point: its own end takes the state again.
	if r.active[key] == 0 && r.begun[key] == begun {
		r.quiets[key] = quiet{time.Now(), st, found}
	}
	r.mu.Unlock()
}

// checkHostBound checks that the table of host state stays within the
// bound SetHostLimit set.
func (r *run) checkHostBound(when string) {
	if r.s.hostLimit == 0 {
		return
	}
	if n := len(r.stats()); n > r.s.hostLimit {
		r.violate("%d hosts have state %s, the table holds at most %d", n, when, r.s.hostLimit)
	}
}

// polluted reports whether a call was made under the context of attempt n
// before it was sent.
func (c *callRun) polluted(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.underAttempt[n]
}

// defectProgressPolluted names a library defect the harness reports.
const defectProgressPolluted = "library defect (progress-polluted)"

// flatStats is a host's HostStats with its sections flattened, absent
// ones as zero, as the checks compare them.
type flatStats struct {
	Host                              string
	HasBudget                         bool
	BudgetAvailable, BudgetCapacity   float64
	HasBreaker                        bool
	BreakerState                      httpretry.BreakerState
	BreakerFailures, BreakerSuccesses uint32
	ConsecutiveFailures               uint32
	InFlight, Waiting                 int
	HasHedgeBudget                    bool
	HedgeTokens                       float64
	PaceInFlight                      int64
}

// stats returns the Transport's Stats, flattened.
func (r *run) stats() []flatStats {
	var out []flatStats
	for _, st := range r.tr.Stats() {
		f := flatStats{Host: st.Host}
		if b := st.Budget; b != nil {
			f.HasBudget, f.BudgetAvailable, f.BudgetCapacity = true, b.Available, b.Capacity
		}
		if b := st.Breaker; b != nil {
			f.HasBreaker, f.BreakerState, f.BreakerFailures, f.BreakerSuccesses, f.ConsecutiveFailures = true, b.State, b.Failures, b.Successes, b.ConsecutiveFailures
		}
		if l := st.Limit; l != nil {
			f.InFlight, f.Waiting = l.InFlight, l.Waiting
		}
		if h := st.Hedging; h != nil {
			f.HasHedgeBudget, f.HedgeTokens = true, h.Tokens
		}
		if p := st.Pacing; p != nil {
			f.PaceInFlight = p.InFlight
		}
		out = append(out, f)
	}
	return out
}
