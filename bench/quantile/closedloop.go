package quantile

import (
	"math/rand/v2"
	"time"
)

// Rule is which attempts a hedging client records into its estimator.
type Rule int

const (
	// FirstCensored records the first attempt of each request: its
	// latency when it answered, its cancellation time when a hedge beat
	// it (a lower bound of its latency, at least the delay). httpretry's
	// rule.
	FirstCensored Rule = iota
	// AllAttempts records every attempt that returns, a cancelled one at
	// the time it was cancelled, measured from its own start: a hedge
	// cancelled a moment after it was sent counts as a fast answer.
	// failsafe-go v0.9.8's hedge executor does this with its default
	// CancelIf.
	AllAttempts
	// Winners records the latency of the attempt that answered, from its
	// own start: what a hook that times successful attempts sees. A hedge
	// that beat a stuck attempt counts as a fast answer and the stuck one
	// is never seen.
	Winners
)

// Policy is a hedging client: an estimator, how the delay follows from it
// and which samples it records. It sends at most one hedge per request and
// has no budget, so that the estimator alone decides.
type Policy struct {
	Name       string
	Q          float64
	MinSamples int
	New        func(q float64) Estimator
	// MedianBound makes the delay max(Q, 2 × median), httpretry's rule.
	MedianBound bool
	Rule        Rule
}

// Policies are the hedging clients compared in the closed loop.
func Policies() []Policy {
	hist := func(float64) Estimator { return newWindowHist(512) }
	fs := func(age int) func(q float64) Estimator {
		return func(q float64) Estimator { return newMoving(q, age) }
	}
	return []Policy{
		{"failsafe-go quantile 0.95, age 30, threshold 20", 0.95, 20, fs(30), false, AllAttempts},
		{"failsafe-go quantile 0.95, age 300, threshold 100", 0.95, 100, fs(300), false, AllAttempts},
		{"failsafe-go quantile 0.99, age 30, threshold 20", 0.99, 20, fs(30), false, AllAttempts},
		{"histogram p95, winners recorded", 0.95, 100, hist, false, Winners},
		{"histogram p95, every attempt, cancelled at cancellation", 0.95, 100, hist, false, AllAttempts},
		{"histogram p95, first attempts censored", 0.95, 100, hist, false, FirstCensored},
		{"histogram p99, first attempts censored", 0.99, 100, hist, false, FirstCensored},
		{"histogram max(p95, 2×p50), first attempts censored (chosen)", 0.95, 100, hist, true, FirstCensored},
	}
}

// Closed is what one hedging client did on one scenario.
type Closed struct {
	Extra      float64 // hedges per request over the run
	BrownExtra float64 // hedges per request during a brownout
	// P50, P999 are quantiles of the request latency (the answer used).
	P50, P999 time.Duration
	// Delay is the hedge delay at the end of the run; BrownDelay at the
	// end of a brownout, Before just before a change.
	Delay, BrownDelay, Before time.Duration
	// Follow is the number of requests after a shift until the delay is
	// within 20 % of its final value for good; Relearn the same after a
	// brownout, against the delay before it, RelearnTime in virtual time.
	// -1: never.
	Follow, Relearn int
	RelearnTime     time.Duration
}

// RunClosed plays a scenario through a hedging client.
func RunClosed(p Policy, sc Scenario, seed uint64) Closed {
	rng := rand.New(rand.NewPCG(seed, 14))
	e := p.New(p.Q)
	var (
		at, brownEnd        time.Duration
		recorded, hedges    int
		brownReqs, brownHdg int
		lats                = make([]time.Duration, 0, sc.Requests)
		delays              = make([]time.Duration, 0, sc.Requests)
		ats                 = make([]time.Duration, 0, sc.Requests)
		r                   = Closed{Follow: -1, Relearn: -1}
		startIdx, endIdx    = -1, -1
	)
	record := func(d time.Duration) { e.Record(d); recorded++ }
	for i := range sc.Requests {
		inBrown := sc.BrownEnds > 0 && at >= sc.Change && at < sc.BrownEnds
		if sc.BrownEnds > 0 && at >= sc.Change && startIdx < 0 {
			startIdx = i
		}
		if sc.BrownEnds > 0 && at >= sc.BrownEnds && endIdx < 0 {
			endIdx, brownEnd = i, at
		}
		first := sc.Draw(rng, i, at)
		d, ok := time.Duration(0), recorded >= p.MinSamples
		if ok {
			d, ok = e.Quantile(p.Q)
			if m, _ := e.Quantile(0.5); p.MedianBound && 2*m > d {
				d = 2 * m
			}
		}
		lat := first
		if ok && first > d {
			hedges++
			if inBrown {
				brownHdg++
			}
			hedge := sc.Draw(rng, i, at+d)
			won := d+hedge < first
			if won {
				lat = d + hedge
			}
			switch p.Rule {
			case FirstCensored:
				// The first attempt's latency, or its cancellation time:
				// with one hedge, the request's latency.
				record(lat)
			case AllAttempts:
				if won {
					record(hedge)
					record(lat) // the first attempt, cancelled
				} else {
					record(first)
					record(first - d) // the hedge, cancelled
				}
			case Winners:
				if won {
					record(hedge)
				} else {
					record(first)
				}
			}
		} else {
			record(first)
		}
		if inBrown {
			brownReqs++
		}
		lats, delays, ats = append(lats, lat), append(delays, d), append(ats, at)
		at += lat / Concurrency
	}
	r.Extra = float64(hedges) / float64(sc.Requests)
	if brownReqs > 0 {
		r.BrownExtra = float64(brownHdg) / float64(brownReqs)
	}
	r.P50, r.P999 = exact(lats, 0.5), exact(lats, 0.999)
	r.Delay = delays[len(delays)-1]
	switch {
	case sc.ChangeAt > 0:
		r.Before = delays[sc.ChangeAt-1]
		r.Follow = settle(delays[sc.ChangeAt:], r.Delay, 0.2)
	case endIdx > 0:
		r.Before, r.BrownDelay = delays[startIdx-1], delays[endIdx-1]
		if r.Relearn = settle(delays[endIdx:], r.Before, 0.2); r.Relearn >= 0 {
			r.RelearnTime = ats[endIdx+r.Relearn] - brownEnd
		}
	}
	return r
}
