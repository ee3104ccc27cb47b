package sim

import (
	"time"

	"github.com/seedhq/httpretry/backoff"
)

// HerdConfig describes scenario B: N clients each send one request at
// t = 0 to a server that is down until Recover, and from then on admits
// Capacity requests per Window, rejecting the rest at once (a 503 without
// Retry-After). Clients retry without limit and without a budget, so the
// run measures how the backoff spreads the herd and how long it takes to
// drain.
type HerdConfig struct {
	N        int
	Capacity int           // admitted per window once recovered
	Window   time.Duration // counting window
	Recover  time.Duration // t1: the server is down before it
	RTT      time.Duration // from an attempt to its answer; 0 means instant
	Strategy backoff.Strategy
	// SharedSeed gives every client the same random stream, the bug of
	// cenkalti/backoff#41: the jitter then moves the whole herd together.
	SharedSeed bool
}

// HerdRun is the outcome of one run of scenario B.
type HerdRun struct {
	Arrivals      []int         // attempts arriving in each window, from t = 0
	FirstRetries  []int         // arrivals of first retries only, per window
	AttemptsPre   int           // attempts before Recover
	Attempts      int           // all attempts
	RejectedAfter int           // attempts rejected at or after Recover
	PeakAfter     int           // most arrivals in one window at or after Recover
	Drain         time.Duration // last success − Recover
	CapSleeps     float64       // share of delays equal to the strategy's largest delay drawn
	// IdealAfter is the uniform-spread ideal peak per window at recovery:
	// W·Σ 1/ℓ over the sleeps ℓ in progress at Recover (see HerdIdeal).
	IdealAfter float64
}

// RunHerd runs scenario B once.
func RunHerd(c HerdConfig, runSeed uint64) HerdRun {
	type client struct {
		retry int
		prev  time.Duration
	}
	cs := make([]client, c.N)
	rs := make([]*randStream, c.N)
	var q queue
	q.ev = make([]event, 0, c.N)
	for i := range cs {
		id := i
		if c.SharedSeed {
			id = 0
		}
		rs[i] = &randStream{Stream(runSeed, id)}
		q.push(0, 0, int32(i), 0)
	}
	window := func(t time.Duration) int { return int(t / c.Window) }
	var (
		run      HerdRun
		admitted []int
		last     time.Duration
		maxSleep time.Duration
		atMax    int
		sleeps   int
	)
	grow := func(s []int, w int) []int {
		for len(s) <= w {
			s = append(s, 0)
		}
		return s
	}
	for q.len() > 0 {
		e := q.pop()
		w := window(e.at)
		run.Arrivals = grow(run.Arrivals, w)
		run.Arrivals[w]++
		run.Attempts++
		if e.val == 1 {
			run.FirstRetries = grow(run.FirstRetries, w)
			run.FirstRetries[w]++
		}
		if e.at < c.Recover {
			run.AttemptsPre++
		} else {
			admitted = grow(admitted, w)
			if admitted[w] < c.Capacity {
				admitted[w]++
				last = e.at
				continue
			}
			run.RejectedAfter++
		}
		cl := &cs[e.who]
		cl.retry++
		d := c.Strategy.Delay(cl.retry, cl.prev, rs[e.who].Rand)
		cl.prev = d
		sleeps++
		switch {
		case d > maxSleep:
			maxSleep, atMax = d, 1
		case d == maxSleep:
			atMax++
		}
		next := e.at + c.RTT + d
		if e.at < c.Recover && next >= c.Recover && next > e.at {
			run.IdealAfter += float64(c.Window) / float64(next-e.at)
		}
		q.push(next, 0, e.who, int64(cl.retry))
	}
	for w := window(c.Recover); w < len(run.Arrivals); w++ {
		run.PeakAfter = max(run.PeakAfter, run.Arrivals[w])
	}
	run.Drain = last - c.Recover
	if sleeps > 0 {
		run.CapSleeps = float64(atMax) / float64(sleeps)
	}
	return run
}

// HerdPoint is scenario B's result for one mode over several runs.
type HerdPoint struct {
	Mode          string
	Config        HerdConfig
	Runs          []HerdRun
	MeanArrivals  []float64 // arrivals per window, averaged over the runs
	PeakAfter     Summary   // per-run peak after recovery
	MeanPeakAfter float64   // peak of MeanArrivals after recovery: the shape without counting noise
	Drain         Summary   // seconds
	RejectedAfter Summary
	Attempts      Summary
	AttemptsPre   Summary
	CapSleeps     Summary
	IdealAfter    Summary // per-run uniform-spread ideal peak after recovery
}

// RunHerdPoint runs scenario B runs times with seeds RunSeed(seed, N, i).
func RunHerdPoint(m Mode, c HerdConfig, runs int, seed uint64) HerdPoint {
	c.Strategy = m.Strategy
	p := HerdPoint{Mode: m.Name, Config: c}
	var peak, drain, rej, att, pre, capS, ideal []float64
	for i := range runs {
		r := RunHerd(c, RunSeed(seed, c.N, i))
		p.Runs = append(p.Runs, r)
		for len(p.MeanArrivals) < len(r.Arrivals) {
			p.MeanArrivals = append(p.MeanArrivals, 0)
		}
		for w, a := range r.Arrivals {
			p.MeanArrivals[w] += float64(a) / float64(runs)
		}
		peak = append(peak, float64(r.PeakAfter))
		drain = append(drain, r.Drain.Seconds())
		rej = append(rej, float64(r.RejectedAfter))
		att = append(att, float64(r.Attempts))
		pre = append(pre, float64(r.AttemptsPre))
		capS = append(capS, r.CapSleeps)
		ideal = append(ideal, r.IdealAfter)
	}
	for w := int(c.Recover / c.Window); w < len(p.MeanArrivals); w++ {
		p.MeanPeakAfter = max(p.MeanPeakAfter, p.MeanArrivals[w])
	}
	p.PeakAfter, p.Drain, p.RejectedAfter = Summarize(peak), Summarize(drain), Summarize(rej)
	p.Attempts, p.AttemptsPre, p.CapSleeps = Summarize(att), Summarize(pre), Summarize(capS)
	p.IdealAfter = Summarize(ideal)
	return p
}

// MeanSleepAtCap estimates the mean delay a strategy draws once a client
// has been failing long enough to reach its cap: it calls the strategy for
// retries 64 to 64+samples, feeding each delay back as prev (which
// decorrelated jitter needs), and averages. It is the s̄ of the herd's
// uniform-spread ideal (see HerdIdeal).
func MeanSleepAtCap(s backoff.Strategy, samples int, seed uint64) time.Duration {
	r := Stream(seed, 0)
	var prev time.Duration
	for n := 1; n < 64; n++ {
		prev = s.Delay(n, prev, r)
	}
	var sum float64
	for n := 64; n < 64+samples; n++ {
		prev = s.Delay(n, prev, r)
		sum += float64(prev)
	}
	return time.Duration(sum / float64(samples))
}

// HerdIdeal is the uniform-spread ideal peak per window for n clients that
// are all still failing and each come back once per mean sleep s̄: by
// Little's law they make n/s̄ arrivals per unit of time on average, and a
// perfectly even spread of them has a peak equal to that mean, n·W/s̄ per
// window. No arrangement with the same mean sleep can have a lower peak
// (N arrivals over a span L put at least ⌈N·W/L⌉ into some window of
// width W).
//
// RunHerd measures the same quantity without knowing s̄: it sums W/ℓ over
// the sleeps ℓ in progress at recovery. Sleeps that span an instant are a
// length-biased sample, and the mean of 1/ℓ under that bias is exactly 1/s̄,
// so the sum estimates n·W/s̄ even while clients are still climbing the
// exponential, where no single s̄ exists.
func HerdIdeal(n int, window, meanSleep time.Duration) float64 {
	return float64(n) * float64(window) / float64(meanSleep)
}

// Scenario B's engine settings: base 100 ms and cap 10 s, with retries
// counted as Brooker's simulator counts them (first ceiling 2·base), so the
// exponential family gets Base = 200 ms here; decorrelated
// starts from its base, 100 ms.
const (
	herdBase = 100 * time.Millisecond
	herdCap  = 10 * time.Second
)

// HerdModes returns the strategies of scenario B: none, ±10 %, equal,
// full, decorrelated, and full jitter with a doubled ceiling (the variant
// whose mean sleep matches no jitter's before the cap).
func HerdModes() []Mode {
	byName := map[string]Mode{}
	for _, m := range jitterModes(herdBase, herdCap) {
		byName[m.Name] = m
	}
	none := byName["exponential"] // in scenario B, "none" is exponential without jitter
	none.Name = "none"
	modes := []Mode{none}
	for _, name := range []string{"percent10", "equal", "full", "decorrelated", "full2x"} {
		modes = append(modes, byName[name])
	}
	return modes
}

// DefaultHerd is scenario B's default setup: 1000 clients, 50 admitted per
// 100 ms window (500 rps) from t1, answers in no time.
func DefaultHerd(recover time.Duration) HerdConfig {
	return HerdConfig{N: 1000, Capacity: 50, Window: 100 * time.Millisecond, Recover: recover}
}
