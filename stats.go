package httpretry

import (
	"cmp"
	"slices"
	"time"
)

// HostStats is a snapshot of what a Transport keeps for one host.
type HostStats struct {
	Host string // the host's key, as Attempt.Host

	HasBudget       bool    // the host has a retry budget
	BudgetAvailable float64 // what the budget holds now, in its own units (tokens, retries), if it reports a level
	BudgetCapacity  float64 // what it holds when full; 0 if it does not report a level
	BudgetRefusals  int64   // retries it refused since the host got state (hedges have a budget of their own)

	HasBreaker          bool         // the host has a circuit breaker
	BreakerState        BreakerState // BreakerClosed without a breaker
	BreakerSuccesses    uint32       // successes counted in the breaker's window
	BreakerFailures     uint32       // failures counted in the breaker's window
	ConsecutiveFailures uint32       // failures in a row, as the breaker counts them
	BreakerRefusals     int64        // attempts it refused since the host got state, first attempts and hedges included

	HasHedgeBudget bool    // the host has a hedge budget: it was sent a hedge, or a request with adaptive hedging
	HedgeTokens    float64 // hedges the hedge budget would allow now, up to its burst of 4; 0 without one
	HedgeRefusals  int64   // hedges the hedge budget refused since the host got state

	// The adaptive hedge delay's view of the host, from the first attempts
	// of its recent requests with adaptive hedging (see HedgePolicy); all
	// zero without such requests, or after ten minutes without one.
	LatencySamples int           // samples the estimate rests on, 512 to 1,024 once warm
	LatencyP50     time.Duration // median latency of those samples
	LatencyP95     time.Duration // their 95th percentile
	LatencyP99     time.Duration // their 99th percentile
	HedgeDelay     time.Duration // the adaptive delay at the quantile and MinSamples of the policy that first reached the host, before MinDelay and MaxDelay; 0 while there is none

	HasThrottle         bool    // adaptive throttling is on (OverloadPolicy.Throttle)
	ThrottleProbability float64 // the probability that an attempt sent now is rejected locally
	ThrottleRefusals    int64   // attempts it rejected since the host got state

	HasLimit      bool  // the adaptive concurrency limit is on (OverloadPolicy.Limit)
	Limit         int   // attempts allowed in flight now
	InFlight      int   // attempts holding a slot
	Waiting       int   // attempts in the waiting room
	LimitRefusals int64 // attempts it refused since the host got state, those whose wait ended included

	HasPacing     bool      // pacing by the host's rate limit is on (OverloadPolicy.Pace)
	PacedUntil    time.Time // when the quota the host announced resets; zero when none is in force
	PaceRemaining int64     // requests the host said were left before PacedUntil; -1 when none is in force
	PaceRefusals  int64     // attempts refused since the host got state: the reset was too far away or the policy fails fast

	Attempts      int64     // attempts sent since the host got state, hedges included
	Retries       int64     // of which retries and hedges
	LastFailure   Class     // class of the last failed attempt; ClassDefault if none
	LastFailureAt time.Time // when it failed; zero if none
	LastUsed      time.Time // when a request last used this state
}

// Stats returns a snapshot of the hosts the Transport keeps state for,
// sorted by host. A host gets state at its first failure or its first
// hedge, or, with adaptive hedging or an overload control, at its first
// request; a host that has only succeeded without hedging has none and is
// not listed, and state that is back at rest (full budgets, a closed
// breaker without failures, no recent latency samples, overload controls
// that admit everything) is dropped after a minute. At most 10,000 hosts
// have state at a time. Stats is safe to call while requests flow; it
// allocates only the returned slice.
func (t *Transport) Stats() []HostStats {
	t.init()
	out := make([]HostStats, 0, t.states.n.Load())
	now := time.Now()
	t.states.m.Range(func(_, v any) bool {
		out = append(out, v.(*hostState).snapshot(now))
		return true
	})
	slices.SortFunc(out, func(a, b HostStats) int { return cmp.Compare(a.Host, b.Host) })
	return out
}

func (s *hostState) snapshot(now time.Time) HostStats {
	st := HostStats{
		Host:        s.key,
		Attempts:    s.attempts.Load(),
		Retries:     s.retries.Load(),
		LastFailure: Class(s.lastClass.Load()),
		LastUsed:    time.Unix(0, s.lastUsed.Load()),
	}
	if at := s.lastFailure.Load(); at != 0 {
		st.LastFailureAt = time.Unix(0, at)
	}
	if s.budget != nil {
		st.HasBudget, st.BudgetRefusals = true, s.budgetRefusals.Load()
		if l, ok := s.budget.(leveler); ok {
			st.BudgetAvailable, st.BudgetCapacity = l.Level()
		}
	}
	if h := s.hedges.Load(); h != nil {
		st.HasHedgeBudget, st.HedgeTokens, st.HedgeRefusals = true, h.tokens(), s.hedgeRefusals.Load()
	}
	if l := s.latency.Load(); l != nil {
		ls := l.snapshot(now)
		st.LatencySamples, st.LatencyP50, st.LatencyP95, st.LatencyP99, st.HedgeDelay = ls.Samples, ls.P50, ls.P95, ls.P99, ls.Delay
	}
	if s.breaker != nil {
		state, counts := s.breaker.state()
		st.HasBreaker, st.BreakerState = true, state
		st.BreakerSuccesses, st.BreakerFailures = counts.TotalSuccesses, counts.TotalFailures
		st.ConsecutiveFailures = counts.ConsecutiveFailures
		st.BreakerRefusals = s.breakerRefusals.Load()
	}
	s.overloadSnapshot(&st, now)
	return st
}

func (s *hostState) overloadSnapshot(st *HostStats, now time.Time) {
	if s.throttle != nil {
		th := s.throttle.snapshot(now)
		st.HasThrottle, st.ThrottleProbability, st.ThrottleRefusals = true, th.RejectProbability, int64(th.Rejected)
	}
	if s.limiter != nil {
		l := s.limiter.snapshot(time.Now())
		st.HasLimit, st.Limit, st.InFlight, st.Waiting = true, int(l.Limit), int(l.InFlight), int(l.Waiting)
		st.LimitRefusals = int64(l.Rejected)
	}
	st.PaceRemaining = -1
	if s.pacer != nil {
		p := s.pacer.snapshot(now)
		st.HasPacing, st.PacedUntil, st.PaceRemaining, st.PaceRefusals = true, p.Reset, p.Remaining, int64(p.Refused)
	}
}
