package quantile

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Concurrency is the number of clients the streams stand for: a request
// starts every latency/Concurrency of virtual time.
const Concurrency = 8

// A Scenario draws the latency of an attempt that starts at virtual time
// at, the i-th request of the run.
type Scenario struct {
	Name     string
	Requests int
	Draw     func(rng *rand.Rand, i int, at time.Duration) time.Duration
	// Change is when the scenario's distribution changes (the shift, the
	// brownout's start) and End when a brownout ends; zero when unused.
	// Shift scenarios change at request ChangeAt instead.
	ChangeAt          int
	Change, BrownEnds time.Duration
}

// around spreads a base latency log-normally with σ = 0.1 (p95 = 1.18 ×
// median), the spread of a loopback server that sleeps a fixed time.
func around(rng *rand.Rand, base time.Duration) time.Duration {
	return time.Duration(float64(base) * math.Exp(0.1*rng.NormFloat64()))
}

// Scenarios are the three streams, then a long tail for the
// closed loop: 10 % of attempts take 5–50 ms, so the p95 lies in the tail
// and hedging cuts off the samples it is estimated from.
func Scenarios() []Scenario {
	ms := time.Millisecond
	return []Scenario{
		{Name: "T1 stragglers", Requests: 20_000, Draw: func(rng *rand.Rand, _ int, _ time.Duration) time.Duration {
			if rng.Float64() < 0.01 {
				return around(rng, 200*ms)
			}
			return around(rng, 2*ms)
		}},
		{Name: "T2 brownout", Requests: 24_000, Change: 2 * time.Second, BrownEnds: 12 * time.Second,
			Draw: func(rng *rand.Rand, _ int, at time.Duration) time.Duration {
				if at >= 2*time.Second && at < 12*time.Second {
					return around(rng, 200*ms)
				}
				return around(rng, 2*ms)
			}},
		{Name: "T3 shift", Requests: 20_000, ChangeAt: 10_000, Draw: func(rng *rand.Rand, i int, _ time.Duration) time.Duration {
			if i >= 10_000 {
				return around(rng, 20*ms)
			}
			return around(rng, 2*ms)
		}},
		{Name: "long tail", Requests: 20_000, Draw: func(rng *rand.Rand, _ int, _ time.Duration) time.Duration {
			if rng.Float64() < 0.1 {
				return 5*ms + time.Duration(45*rng.Float64()*float64(ms))
			}
			return around(rng, 2*ms)
		}},
	}
}

// Sample is one request of an open stream.
type Sample struct {
	D  time.Duration
	At time.Duration
}

// Stream draws a scenario's requests with a seeded generator.
func (s Scenario) Stream(seed uint64) []Sample {
	rng := rand.New(rand.NewPCG(seed, 14))
	out := make([]Sample, 0, s.Requests)
	var at time.Duration
	for i := range s.Requests {
		d := s.Draw(rng, i, at)
		out = append(out, Sample{d, at})
		at += d / Concurrency
	}
	return out
}

// StreamQuantile returns the exact q-quantile of a stream's latencies.
func StreamQuantile(stream []Sample, q float64) time.Duration {
	ds := make([]time.Duration, len(stream))
	for i, s := range stream {
		ds[i] = s.D
	}
	return exact(ds, q)
}

// exact returns the q-quantile of xs.
func exact(xs []time.Duration, q float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// TruthWindow is the number of most recent samples the true quantile is
// taken over.
const TruthWindow = 1000

// Open is how one estimator followed one open stream.
type Open struct {
	// ErrMedian and ErrP95 are the median and 95th percentile of the
	// relative error against the exact quantile of the last TruthWindow
	// samples, checked every 50 requests after the first 2,000.
	ErrMedian, ErrP95 float64
	// Follow is the number of requests after a change until the estimate
	// is within 10 % of the new regime's quantile for good; -1 if never.
	Follow int
	// Relearn is the same after a brownout ends, against the quantile
	// before it, and RelearnTime the virtual time it took.
	Relearn     int
	RelearnTime time.Duration
	// BrownPeak is the estimate at the end of a brownout over the
	// brownout's own quantile.
	BrownPeak float64
}

// RunOpen feeds the stream to e and measures how it follows quantile q.
func RunOpen(e Estimator, sc Scenario, stream []Sample, q float64) Open {
	var errs []float64
	est := make([]time.Duration, len(stream))
	ds := make([]time.Duration, len(stream))
	for i, s := range stream {
		e.Record(s.D)
		ds[i] = s.D
		est[i], _ = e.Quantile(q)
		if i >= 2000 && i%50 == 0 {
			truth := exact(ds[i+1-TruthWindow:i+1], q)
			errs = append(errs, math.Abs(float64(est[i])/float64(truth)-1))
		}
	}
	r := Open{Follow: -1, Relearn: -1}
	slices.Sort(errs)
	r.ErrMedian, r.ErrP95 = errs[len(errs)/2], errs[len(errs)*95/100]
	switch {
	case sc.ChangeAt > 0:
		want := exact(ds[len(ds)-TruthWindow:], q)
		r.Follow = settle(est[sc.ChangeAt:], want, 0.1)
	case sc.BrownEnds > 0:
		start := index(stream, sc.Change)
		end := index(stream, sc.BrownEnds)
		r.BrownPeak = float64(est[end-1]) / float64(exact(ds[start:end], q))
		before := exact(ds[start-TruthWindow:start], q)
		if r.Relearn = settle(est[end:], before, 0.1); r.Relearn >= 0 {
			r.RelearnTime = stream[end+r.Relearn].At - stream[end].At
		}
	}
	return r
}

// index returns the first request that starts at or after at.
func index(stream []Sample, at time.Duration) int {
	i, _ := slices.BinarySearchFunc(stream, at, func(s Sample, at time.Duration) int {
		return int(s.At - at)
	})
	return i
}

// settle returns the first index from which every value is within tol of
// want, or -1.
func settle(xs []time.Duration, want time.Duration, tol float64) int {
	at := -1
	for i, x := range xs {
		switch {
		case math.Abs(float64(x)/float64(want)-1) > tol:
			at = -1
		case at < 0:
			at = i
		}
	}
	return at
}
