package httpretry

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seedhq/httpretry/internal/hoststate"
)

// HostStats is a snapshot of what a Transport keeps for one host: its
// statistics, and one section per mechanism that protects it, nil when the
// host has none (the policy turned it off, or it has not been needed).
type HostStats struct {
	Host string // the host's key, as Attempt.Host

	Attempts      int64     // attempts sent since the host got state, hedges included
	Retries       int64     // of which retries and hedges
	LastFailure   Class     // class of the last failed attempt; ClassDefault if none
	LastFailureAt time.Time // when it failed; zero if none
	LastUsed      time.Time // when a request last used this state

	Budget   *BudgetStats   `json:",omitempty"` // the retry budget
	Breaker  *BreakerStats  `json:",omitempty"` // the circuit breaker (Policy.Breaker)
	Hedging  *HedgingStats  `json:",omitempty"` // the hedge budget and latency estimate: the host was sent a hedge, or a request with adaptive hedging
	Throttle *ThrottleStats `json:",omitempty"` // adaptive throttling (OverloadPolicy.Throttle)
	Limit    *LimitStats    `json:",omitempty"` // the adaptive concurrency limit (OverloadPolicy.Limit)
	Pacing   *PacingStats   `json:",omitempty"` // pacing by the host's rate limit (OverloadPolicy.Pace)
}

// BudgetStats is a host's retry budget. Available and Capacity are zero
// for a budget that does not report its level (Level() (available,
// capacity float64)), as NewTokenBucket's and NewRatioBudget's do.
type BudgetStats struct {
	Available float64 // what the budget holds now, in its own units (tokens, retries)
	Capacity  float64 // what it holds when full
	Refusals  int64   // retries it refused since the host got state (hedges have a budget of their own)
}

// BreakerStats is a host's circuit breaker.
type BreakerStats struct {
	State               BreakerState
	Successes           uint32 // successes counted in the breaker's window
	Failures            uint32 // failures counted in the breaker's window
	ConsecutiveFailures uint32 // failures in a row, as the breaker counts them
	Refusals            int64  // attempts it refused since the host got state, first attempts and hedges included
}

// HedgingStats is a host's hedge budget and, with adaptive hedging, the
// adaptive delay's view of its latency, from the first attempts of its
// recent requests with adaptive hedging (see HedgePolicy): the latency
// fields are zero without such requests, or after ten minutes without one.
type HedgingStats struct {
	Tokens   float64 // hedges the hedge budget would allow now, up to its burst of 4
	Refusals int64   // hedges the hedge budget refused since the host got state

	Samples int           // samples the estimate rests on, 512 to 1,024 once warm
	P50     time.Duration // median latency of those samples
	P95     time.Duration // their 95th percentile
	P99     time.Duration // their 99th percentile
	Delay   time.Duration // the adaptive delay at the quantile and MinSamples of the policy that first reached the host, before MinDelay and MaxDelay; 0 while there is none
}

// ThrottleStats is a host's adaptive throttling.
type ThrottleStats struct {
	Probability float64 // the probability that an attempt sent now is rejected locally
	Refusals    int64   // attempts it rejected since the host got state
}

// LimitStats is a host's adaptive concurrency limit.
type LimitStats struct {
	Limit    int   // attempts allowed in flight now
	InFlight int   // attempts holding a slot
	Waiting  int   // attempts in the waiting room
	Refusals int64 // attempts it refused since the host got state, those whose wait ended included
}

// PacingStats is the rate limit a host announced, as pacing follows it.
type PacingStats struct {
	Until     time.Time // when the quota the host announced resets; zero when none is in force
	Remaining int64     // requests the host said were left before Until; -1 when none is in force
	InFlight  int64     // attempts admitted and not yet answered
	Refusals  int64     // attempts refused since the host got state: the reset was too far away or the policy fails fast
	Rate      float64   // the rate attempts are sent at, per second: learnt from the host's throttles or declared (OverloadPolicy.Quota); 0 when pacing does not limit the rate
}

// BreakerState is the state of a circuit breaker.
type BreakerState int

const (
	BreakerClosed   BreakerState = iota // attempts pass
	BreakerHalfOpen                     // trial attempts pass
	BreakerOpen                         // attempts fail fast with ErrCircuitOpen
)

var breakerStateNames = [...]string{"closed", "half-open", "open"}

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	if s >= 0 && int(s) < len(breakerStateNames) {
		return breakerStateNames[s]
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// Stats returns a snapshot of the hosts the Transport keeps state for,
// sorted by host. A host gets state at its first failure or its first
// hedge, or, with adaptive hedging or an overload control, at its first
// request; a host that has only succeeded without hedging has none and is
// not listed, and state that is back at rest (full budgets, a closed
// breaker without failures, no recent latency samples, overload controls
// that admit everything) is no longer listed after a minute unused, and
// is dropped as the table is swept. At most 10,000 hosts have state at a
// time; state that protects its host (a budget that is not full, a breaker
// that is not closed or counted failures, attempts in flight) is never
// dropped for other hosts, so past that bound a new host goes without
// state. Stats is safe to call while requests flow. It describes every
// host, which at 10,000 hosts is megabytes: StatsPage describes a few,
// the most in trouble first.
func (t *Transport) Stats() []HostStats {
	t.init()
	now := time.Now()
	n := t.states.Len()
	out := make([]HostStats, 0, n)
	secs := make([]sections, n) // the hosts' sections, one allocation for them all
	t.states.Range(func(s *hoststate.State) bool {
		if s.Stale(now) {
			return true
		}
		var sec *sections
		if i := len(out); i < len(secs) {
			sec = &secs[i]
		} else {
			sec = new(sections) // a host that got state since Len
		}
		out = append(out, snapshot(s, sec, now))
		return true
	})
	slices.SortFunc(out, func(a, b HostStats) int { return cmp.Compare(a.Host, b.Host) })
	return out
}

// StatsQuery selects the hosts StatsPage describes. The zero value selects
// the 100 hosts most in trouble.
type StatsQuery struct {
	Filter string // only hosts whose key contains Filter; "" means every host
	Offset int    // hosts to skip, in the order StatsPage lists them; negative means 0
	Limit  int    // the most hosts to describe; 0 or less means 100
}

// StatsPage describes one page of the hosts Stats would list, those most
// in trouble first: open breakers, then half-open ones, then the emptiest
// budgets, then the most recent failures, then by host. It returns the
// page and how many hosts match the query's Filter in all. It reads every
// host's state but describes only the page's, in memory that grows with
// the page, not with the table, so a status page or a metrics collection
// can call it often whatever the number of hosts.
func (t *Transport) StatsPage(q StatsQuery) (hosts []HostStats, total int) {
	t.init()
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	offset := max(q.Offset, 0)
	keep := offset + limit
	if keep < offset { // a huge offset: nothing to keep
		keep = offset
	}
	now := time.Now()
	var worst troubleHeap // the keep hosts most in trouble, least of them on top
	t.states.Range(func(s *hoststate.State) bool {
		if s.Stale(now) || q.Filter != "" && !strings.Contains(s.Key, q.Filter) {
			return true
		}
		total++
		r := rankOf(s)
		if worst.Len() < keep {
			heap.Push(&worst, r)
		} else if worst.Len() > 0 && r.before(worst[0]) {
			worst[0] = r
			heap.Fix(&worst, 0)
		}
		return true
	})
	slices.SortFunc(worst, func(a, b rank) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	if offset >= len(worst) {
		return nil, total
	}
	page := make([]*hoststate.State, 0, len(worst)-offset)
	for _, r := range worst[offset:] {
		page = append(page, r.s)
	}
	return snapshots(page, now), total
}

// rank is where a host stands in trouble order.
type rank struct {
	breaker     int     // 2 open, 1 half-open, 0 closed or none
	level       float64 // the budget's share available, 1 without a level
	lastFailure int64
	s           *hoststate.State
}

func rankOf(s *hoststate.State) rank {
	r := rank{level: 1, lastFailure: s.LastFailure.Load(), s: s}
	if s.Breaker != nil {
		switch st, _ := s.Breaker.State(); BreakerState(st) {
		case BreakerOpen:
			r.breaker = 2
		case BreakerHalfOpen:
			r.breaker = 1
		}
	}
	if l, ok := s.Budget.(leveler); ok {
		if available, capacity := l.Level(); capacity > 0 {
			r.level = min(max(available/capacity, 0), 1)
		}
	}
	return r
}

// before reports whether r is more in trouble than o.
func (r rank) before(o rank) bool {
	switch {
	case r.breaker != o.breaker:
		return r.breaker > o.breaker
	case r.level != o.level:
		return r.level < o.level
	case r.lastFailure != o.lastFailure:
		return r.lastFailure > o.lastFailure
	}
	return r.s.Key < o.s.Key
}

// troubleHeap holds ranks with the least in trouble on top.
type troubleHeap []rank

func (h troubleHeap) Len() int           { return len(h) }
func (h troubleHeap) Less(i, j int) bool { return h[j].before(h[i]) }
func (h troubleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *troubleHeap) Push(x any)        { *h = append(*h, x.(rank)) }
func (h *troubleHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sections holds one host's sections, so that its HostStats points into
// one allocation.
type sections struct {
	budget   BudgetStats
	breaker  BreakerStats
	hedging  HedgingStats
	throttle ThrottleStats
	limit    LimitStats
	pacing   PacingStats
}

// snapshots describes states at now.
func snapshots(states []*hoststate.State, now time.Time) []HostStats {
	out := make([]HostStats, len(states))
	secs := make([]sections, len(states))
	for i, s := range states {
		out[i] = snapshot(s, &secs[i], now)
	}
	return out
}

func snapshot(s *hoststate.State, sec *sections, now time.Time) HostStats {
	st := HostStats{
		Host:        s.Key,
		Attempts:    s.Attempts.Load(),
		Retries:     s.Retries.Load(),
		LastFailure: Class(s.LastClass.Load()),
		LastUsed:    s.LastUsed(),
	}
	if at := s.LastFailure.Load(); at != 0 {
		st.LastFailureAt = time.Unix(0, at)
	}
	if s.Budget != nil {
		st.Budget = &sec.budget
		st.Budget.Refusals = s.BudgetRefusals.Load()
		if l, ok := s.Budget.(leveler); ok {
			st.Budget.Available, st.Budget.Capacity = l.Level()
		}
	}
	if s.Breaker != nil {
		state, counts := s.Breaker.State()
		st.Breaker = &sec.breaker
		*st.Breaker = BreakerStats{State: BreakerState(state), Successes: counts.Successes, Failures: counts.Failures,
			ConsecutiveFailures: counts.ConsecutiveFailures, Refusals: s.BreakerRefusals.Load()}
	}
	if h := s.Hedges(); h != nil {
		st.Hedging = &sec.hedging
		st.Hedging.Tokens, st.Hedging.Refusals = h.Tokens(), s.HedgeRefusals.Load()
		if l := s.Latency(); l != nil {
			ls := l.Snapshot(now)
			st.Hedging.Samples, st.Hedging.P50, st.Hedging.P95, st.Hedging.P99, st.Hedging.Delay = ls.Samples, ls.P50, ls.P95, ls.P99, ls.Delay
		}
	}
	if s.Throttle != nil {
		th := s.Throttle.Snapshot(now)
		st.Throttle = &sec.throttle
		*st.Throttle = ThrottleStats{Probability: th.RejectProbability, Refusals: int64(th.Rejected)}
	}
	if s.Limiter != nil {
		l := s.Limiter.Snapshot(now)
		st.Limit = &sec.limit
		*st.Limit = LimitStats{Limit: int(l.Limit), InFlight: int(l.InFlight), Waiting: int(l.Waiting), Refusals: int64(l.Rejected)}
	}
	if s.Pacer != nil {
		p := s.Pacer.Snapshot(now)
		st.Pacing = &sec.pacing
		*st.Pacing = PacingStats{Until: p.Reset, Remaining: p.Remaining, InFlight: p.InFlight, Refusals: int64(p.Refused), Rate: p.Rate}
	}
	return st
}
