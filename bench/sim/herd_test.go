package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func herdMode(t *testing.T, name string) Mode {
	t.Helper()
	for _, m := range HerdModes() {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no herd mode %q", name)
	return Mode{}
}

// TestHerdNoJitterHitsAsOne: without jitter every client comes back in the
// same window, every round, and only Capacity get in per cap period.
func TestHerdNoJitterHitsAsOne(t *testing.T) {
	t.Parallel()
	c := DefaultHerd(5 * time.Second)
	p := RunHerdPoint(herdMode(t, "none"), c, 2, 1)
	assert.Equal(t, float64(c.N), p.PeakAfter.Min, "one window holds the whole herd")
	assert.Equal(t, 9500.0, p.RejectedAfter.Mean, "rounds of 1000, 950, … 50: 50 admitted per round")
	assert.InDelta(t, 187.6, p.Drain.Mean, 0.1, "the last of 20 rounds, cap 10 s apart")
}

// TestHerdFullJitterSpreads checks scenario B's targets for full jitter:
// after recovery the arrival rate stays within 1.2× the uniform-spread
// ideal (HerdIdeal) and almost nothing is rejected.
func TestHerdFullJitterSpreads(t *testing.T) {
	t.Parallel()
	runs := reps(t, 20, 8)
	for _, t1 := range []time.Duration{5 * time.Second, 30 * time.Second} {
		c := DefaultHerd(t1)
		p := RunHerdPoint(herdMode(t, "full"), c, runs, 1)
		ideal := p.IdealAfter.Mean
		assert.LessOrEqual(t, p.MeanPeakAfter, 1.2*ideal, "t1=%v: mean arrivals peak %.1f, ideal %.1f", t1, p.MeanPeakAfter, ideal)
		// A single run adds counting noise: about √ideal per window.
		assert.LessOrEqual(t, p.PeakAfter.Mean, 1.5*ideal, "t1=%v: per-run peak %.1f, ideal %.1f", t1, p.PeakAfter.Mean, ideal)
		assert.LessOrEqual(t, p.RejectedAfter.Max, 0.001*float64(c.N), "t1=%v: rejected after recovery", t1)
		assert.LessOrEqual(t, p.Drain.Max, (herdCap + 2*time.Second).Seconds(), "drain ≤ cap + ⌈N/C⌉·W")
	}
}

// TestHerdOrdering: the post-recovery peak falls from no jitter to ±10 %
// to equal to full jitter, as their spreads predict: none puts the herd in
// one window, ±10 % spreads it over 0.2·d, equal jitter over d/2, full
// jitter over d.
func TestHerdOrdering(t *testing.T) {
	t.Parallel()
	runs := reps(t, 10, 4)
	c := DefaultHerd(5 * time.Second)
	peak := map[string]float64{}
	for _, m := range HerdModes() {
		peak[m.Name] = RunHerdPoint(m, c, runs, 3).PeakAfter.Mean
	}
	assert.Greater(t, peak["none"], peak["percent10"])
	assert.Greater(t, peak["percent10"], peak["equal"])
	assert.Greater(t, peak["equal"], peak["full"])
	assert.Greater(t, peak["decorrelated"], peak["full"])
}

// TestHerdFirstWave: the first retries of a herd that failed at t = 0 land
// uniformly below the first ceiling d, so each window of it holds N·W/d
// (N arrivals spread uniformly over d), here 1000·100 ms/200 ms = 500.
func TestHerdFirstWave(t *testing.T) {
	t.Parallel()
	r := RunHerd(HerdConfig{N: 1000, Capacity: 50, Window: 100 * time.Millisecond,
		Recover: time.Hour / 2, Strategy: herdMode(t, "full").Strategy}, 1)
	require.GreaterOrEqual(t, len(r.FirstRetries), 2)
	assert.InEpsilon(t, 500, r.FirstRetries[0], 0.1)
	assert.InEpsilon(t, 500, r.FirstRetries[1], 0.1)
}

// TestHerdIdealMatchesLittle: once every client sleeps at the cap, the
// measured ideal equals N·W/s̄ with s̄ the strategy's own mean sleep there.
func TestHerdIdealMatchesLittle(t *testing.T) {
	t.Parallel()
	c := DefaultHerd(30 * time.Second)
	for _, name := range []string{"none", "full", "equal"} {
		m := herdMode(t, name)
		p := RunHerdPoint(m, c, reps(t, 10, 4), 5)
		want := HerdIdeal(c.N, c.Window, MeanSleepAtCap(m.Strategy, 10000, 5))
		assert.InEpsilon(t, want, p.IdealAfter.Mean, 0.15, name)
	}
}

// TestHerdSharedSeedResynchronises shows cenkalti/backoff#41: clients that
// share one random sequence draw the same "random" delays and stay a herd.
func TestHerdSharedSeedResynchronises(t *testing.T) {
	t.Parallel()
	c := DefaultHerd(5 * time.Second)
	c.Strategy = herdMode(t, "full").Strategy
	c.SharedSeed = true
	assert.Equal(t, c.N, RunHerd(c, 1).PeakAfter)
}
