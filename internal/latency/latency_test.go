package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatencyBuckets(t *testing.T) {
	t.Parallel()
	prevLo := int64(0)
	for i := range latencyBuckets {
		lo, width := latencyBucketBounds(i)
		require.Greater(t, lo, prevLo, "bucket %d", i)
		assert.LessOrEqual(t, float64(width)/float64(lo), 0.125, "bucket %d spans at most 12.5 %% of its lower bound", i)
		assert.Equal(t, i, latencyBucket(time.Duration(lo)), "lower bound of bucket %d", i)
		assert.Equal(t, i, latencyBucket(time.Duration(lo+width-1)), "upper end of bucket %d", i)
		prevLo = lo
	}
	assert.Equal(t, 0, latencyBucket(0), "shorter than the range: the first bucket")
	assert.Equal(t, 0, latencyBucket(-time.Second))
	assert.Equal(t, latencyBuckets-1, latencyBucket(time.Hour), "longer than the range: the last bucket")
}

// latencyStream draws attempt latencies: a base latency with a log-normal
// spread (σ = 0.1, so the p95 is 1.18 × the median), as a loopback server
// with a fixed sleep shows, and the scenarios on top of it.
type latencyStream struct {
	rng *rand.Rand
	at  time.Time // virtual time of the next request
}

func newLatencyStream(seed uint64) *latencyStream {
	return &latencyStream{rng: rand.New(rand.NewPCG(seed, 14)), at: time.Unix(1_700_000_000, 0)}
}

func (s *latencyStream) around(base time.Duration) time.Duration {
	return time.Duration(float64(base) * math.Exp(0.1*s.rng.NormFloat64()))
}

// t1 is a straggler stream: 2 ms, and 200 ms with probability 1 %.
func (s *latencyStream) t1() time.Duration {
	if s.rng.Float64() < 0.01 {
		return s.around(200 * time.Millisecond)
	}
	return s.around(2 * time.Millisecond)
}

// advance moves the clock as 8 concurrent clients would: a request starts
// every d/8.
func (s *latencyStream) advance(d time.Duration) time.Time {
	s.at = s.at.Add(d / 8)
	return s.at
}

// exactDelay is the delay the estimator aims at, computed from the exact
// samples.
func exactDelay(samples []time.Duration, q float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(int(q*float64(len(s))), len(s)-1)] }
	return max(at(q), latencyMedianFactor*at(0.5))
}

func within(got, want time.Duration, tol float64) bool {
	return math.Abs(float64(got)/float64(want)-1) <= tol
}

func TestLatencyEstimatorQuantiles(t *testing.T) {
	t.Parallel()
	s := newLatencyStream(1)
	e := New(0.95, 100, time.Minute)
	var samples []time.Duration
	for range 5*latencyWindow + 100 {
		d := time.Duration(float64(3*time.Millisecond) * math.Exp(0.6*s.rng.NormFloat64())) // a wide log-normal
		samples = append(samples, d)
		e.Record(d, s.advance(d))
	}
	snap := e.Snapshot(s.at)
	live := samples[len(samples)-snap.Samples:]
	require.Equal(t, latencyWindow+100, snap.Samples, "the full previous window and the current one")
	slices.Sort(live)
	for _, c := range []struct {
		q   float64
		got time.Duration
	}{{0.5, snap.P50}, {0.95, snap.P95}, {0.99, snap.P99}} {
		want := live[int(c.q*float64(len(live)))]
		assert.True(t, within(c.got, want, 0.07), "p%g: estimate %v, exact %v", 100*c.q, c.got, want)
	}
	d, ok := e.Delay(s.at)
	require.True(t, ok)
	assert.Equal(t, snap.Delay, d)
	assert.True(t, within(d, exactDelay(live, 0.95), 0.07), "delay %v, exact %v", d, exactDelay(live, 0.95))
}

// TestLatencyEstimatorDelayAt: a request with a quantile or MinSamples of
// its own reads them from the same histogram; one with the estimator's
// own gets the cached delay.
func TestLatencyEstimatorDelayAt(t *testing.T) {
	t.Parallel()
	s := newLatencyStream(2)
	e := New(0.95, 100, time.Minute)
	var samples []time.Duration
	for range 3 * latencyWindow {
		d := time.Duration(float64(3*time.Millisecond) * math.Exp(0.6*s.rng.NormFloat64()))
		samples = append(samples, d)
		e.Record(d, s.advance(d))
	}
	live := samples[len(samples)-e.Snapshot(s.at).Samples:]
	cached, ok := e.Delay(s.at)
	require.True(t, ok)
	got, ok := e.DelayAt(s.at, 0.95, 100)
	require.True(t, ok)
	assert.Equal(t, cached, got, "the estimator's own settings: the cached delay")
	for _, q := range []float64{0.5, 0.9, 0.99} {
		got, ok := e.DelayAt(s.at, q, 100)
		require.True(t, ok)
		assert.True(t, within(got, exactDelay(live, q), 0.07), "q %v: %v, exact %v", q, got, exactDelay(live, q))
	}
	_, ok = e.DelayAt(s.at, 0.95, 2000)
	assert.False(t, ok, "fewer samples than the request asks for")
	_, ok = e.DelayAt(s.at.Add(2*time.Minute), 0.9, 100)
	assert.False(t, ok, "idle past maxIdle")
	_, ok = New(0.95, 100, time.Minute).DelayAt(s.at, 0.9, 1)
	assert.False(t, ok, "no samples")
}

func TestLatencyEstimatorMinSamples(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	e := New(0.95, 20, time.Minute)
	assert.True(t, e.AtRest(now), "new")
	for i := range 19 {
		e.Record(2*time.Millisecond, now)
		_, ok := e.Delay(now)
		require.False(t, ok, "no delay after %d samples", i+1)
	}
	assert.False(t, e.AtRest(now), "holds samples")
	e.RecordCensored(time.Hour, now)
	_, ok := e.Delay(now)
	assert.False(t, ok, "a censored sample is dropped while there is no delay to compare it with")
	e.Record(2*time.Millisecond, now)
	d, ok := e.Delay(now)
	require.True(t, ok, "a delay from the 20th sample on")
	assert.True(t, within(d, 4*time.Millisecond, 0.07), "twice the median of a constant 2 ms: %v", d)
}

func TestLatencyEstimatorIdle(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	e := New(0.95, 10, time.Minute)
	for range 200 {
		e.Record(30*time.Millisecond, now)
	}
	_, ok := e.Delay(now.Add(time.Minute))
	require.True(t, ok, "still current after exactly maxIdle")
	later := now.Add(time.Minute + time.Millisecond)
	_, ok = e.Delay(later)
	assert.False(t, ok, "forgotten after maxIdle")
	assert.True(t, e.AtRest(later))
	assert.Equal(t, Snapshot{}, e.Snapshot(later), "at rest, a snapshot is a new estimator's")
	e.RecordCensored(time.Second, later)
	assert.True(t, e.AtRest(later), "a censored sample does not compare with a forgotten delay")

	e.Record(2*time.Millisecond, later)
	assert.False(t, e.AtRest(later))
	snap := e.Snapshot(later)
	assert.Equal(t, 1, snap.Samples, "the old samples are gone")
	assert.True(t, within(snap.P50, 2*time.Millisecond, 0.07), "%v", snap.P50)
	assert.Zero(t, snap.Delay, "fewer than minSamples again")
}

// hedgeRun plays n requests of a scenario through one hedging client that
// takes its delay from e and records its first attempts as the estimator
// asks: an answer exactly, an attempt the hedge beat as censored at the
// moment it was cancelled. It returns each request's delay (0 when it had
// none) and how many hedges were sent.
func hedgeRun(e *Estimator, s *latencyStream, n int, draw func(i int) time.Duration) (delays []time.Duration, hedges int) {
	for i := range n {
		first := draw(i)
		now := s.advance(first)
		d, ok := e.Delay(now)
		if !ok {
			d = 0
		}
		delays = append(delays, d)
		if ok && first > d {
			hedges++
			if hedge := d + draw(i); hedge < first {
				e.RecordCensored(hedge, now)
				continue
			}
		}
		e.Record(first, now)
	}
	return delays, hedges
}

// settled returns the first index from which every delay is within tol of
// want, or -1.
func settled(delays []time.Duration, want time.Duration, tol float64) int {
	at := -1
	for i, d := range delays {
		switch {
		case !within(d, want, tol):
			at = -1
		case at < 0:
			at = i
		}
	}
	return at
}

func TestLatencyEstimatorScenarios(t *testing.T) {
	t.Parallel()
	const warm = 5000
	t.Run("T1 stragglers", func(t *testing.T) {
		t.Parallel()
		s := newLatencyStream(2)
		e := New(0.95, 100, time.Minute)
		delays, hedges := hedgeRun(e, s, 20_000, func(int) time.Duration { return s.t1() })
		steady := delays[warm:]
		t.Logf("delay %v…%v, %d hedges", slices.Min(steady), slices.Max(steady), hedges)
		assert.Less(t, slices.Max(steady), 6*time.Millisecond, "never pulled up to the stragglers")
		assert.Greater(t, slices.Min(steady), 3500*time.Microsecond, "never pulled down by hedging")
		assert.InDelta(t, 0.01, float64(hedges)/20_000, 0.004, "the stragglers, and little else, are hedged")
	})
	t.Run("T3 shift", func(t *testing.T) {
		t.Parallel()
		s := newLatencyStream(3)
		e := New(0.95, 100, time.Minute)
		delays, hedges := hedgeRun(e, s, 2*warm, func(i int) time.Duration {
			if i < warm {
				return s.around(2 * time.Millisecond)
			}
			return s.around(20 * time.Millisecond)
		})
		at := settled(delays, 40*time.Millisecond, 0.1) - warm
		t.Logf("followed after %d requests; %d hedges", at, hedges)
		assert.True(t, at >= 0 && at <= 1000, "the delay follows the shift within 1,000 requests (took %d)", at)
		assert.Less(t, float64(hedges)/float64(2*warm), 0.03, "extra requests over the run")
	})
	t.Run("T2 brownout", func(t *testing.T) {
		t.Parallel()
		s := newLatencyStream(4)
		e := New(0.95, 100, time.Minute)
		before, _ := hedgeRun(e, s, warm, func(int) time.Duration { return s.around(2 * time.Millisecond) })
		normal := before[len(before)-1]
		start := s.at
		var brown []time.Duration
		for s.at.Sub(start) < 10*time.Second {
			d, _ := hedgeRun(e, s, 1, func(int) time.Duration { return s.around(200 * time.Millisecond) })
			brown = append(brown, d...)
		}
		assert.Greater(t, brown[len(brown)-1], 200*time.Millisecond, "the delay rose with the brownout")
		end := s.at
		after, _ := hedgeRun(e, s, warm, func(int) time.Duration { return s.around(2 * time.Millisecond) })
		at := settled(after, normal, 0.1)
		require.GreaterOrEqual(t, at, 0, "the delay came back")
		back := s.at
		for range warm - at {
			back = back.Add(-time.Duration(float64(2*time.Millisecond) / 8)) // roughly: the mean request gap
		}
		t.Logf("delay %v before, %v at the end of the brownout, back after %d requests (%v)", normal, brown[len(brown)-1], at, back.Sub(end))
		assert.LessOrEqual(t, at, 2*latencyWindow+latencyRefresh, "relearned within the two windows")
		assert.Less(t, back.Sub(end), 2*time.Second, "relearned within 2 s at 4,000 requests per second")
	})
}

// TestLatencyEstimatorCensoring checks that hedging does not move the
// Delay it is driven by: with censored first attempts recorded as the
// estimator asks, the delay under hedging matches the delay of the same
// stream without hedging. Recording the winner's latency instead would
// remove the tail that hedging cuts off.
func TestLatencyEstimatorCensoring(t *testing.T) {
	t.Parallel()
	draw := func(s *latencyStream) func(int) time.Duration {
		return func(int) time.Duration {
			// A long tail: 10 % of attempts take 5–50 ms, so the p95 is
			// well above twice the median and hedges are frequent.
			if s.rng.Float64() < 0.1 {
				return time.Duration(5+45*s.rng.Float64()) * time.Millisecond
			}
			return s.around(2 * time.Millisecond)
		}
	}
	open := New(0.95, 100, time.Minute)
	so := newLatencyStream(5)
	f := draw(so)
	for i := range 10_000 {
		d := f(i)
		open.Record(d, so.advance(d))
	}
	want, _ := open.Delay(so.at)

	hedged := New(0.95, 100, time.Minute)
	sh := newLatencyStream(5)
	delays, hedges := hedgeRun(hedged, sh, 10_000, draw(sh))
	got := delays[len(delays)-1]
	t.Logf("delay with hedging %v, without %v; %d hedges", got, want, hedges)
	assert.True(t, within(got, want, 0.1), "delay with hedging %v, without %v", got, want)
	assert.InDelta(t, 0.05, float64(hedges)/10_000, 0.015, "about one request in twenty is hedged at the p95")
}

// TestLatencyEstimatorConcurrent: eight writers at once lose no sample and
// misplace none. The live windows hold the last 640 samples, and each
// writer's share of them is a run of its own, whose length the scheduler
// picks; so the values cycle through an odd number of latencies, 1 to 5 ms,
// to put the median in the middle of one (3 ms) rather than on the edge
// between two, where a run one sample longer than another would tip it.
func TestLatencyEstimatorConcurrent(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	e := New(0.95, 100, time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				e.Record(time.Duration(1+(g+i)%5)*time.Millisecond, now) // 1 to 5 ms equally often
				e.Delay(now)
				if i%100 == 0 {
					e.Snapshot(now)
				}
			}
		})
	}
	wg.Wait()
	snap := e.Snapshot(now)
	// 16,000 samples: the last 128 in the current window, 512 before them.
	assert.Equal(t, 640, snap.Samples, "samples in the live windows")
	assert.True(t, within(snap.P95, 5*time.Millisecond, 0.13), "p95 %v", snap.P95)
	assert.True(t, within(snap.P50, 3*time.Millisecond, 0.13), "p50 %v", snap.P50)
}

// TestLatencyCountWindows: a bucket counts for one window at a time. A
// sample of an older window, from a writer preempted between taking its
// number and adding it, is dropped rather than counted in a newer window;
// the first sample of a newer window empties the bucket.
func TestLatencyCountWindows(t *testing.T) {
	t.Parallel()
	var c latencyCount
	c.add(5)
	c.add(5)
	assert.Equal(t, uint32(2), c.in(5))
	c.add(4)
	assert.Equal(t, uint32(2), c.in(5), "a late sample of window 4 is not counted in window 5")
	assert.Zero(t, c.in(4))
	c.add(7)
	assert.Equal(t, uint32(1), c.in(7), "window 7 starts from its first sample")
	assert.Zero(t, c.in(5))
	for range latencyWindow - 1 {
		c.add(7)
	}
	assert.Equal(t, uint32(latencyWindow), c.in(7), "a whole window in one bucket")
}

// BenchmarkLatencyRecord is the cost of recording a sample, from every
// processor at once into one host's estimator.
func BenchmarkLatencyRecord(b *testing.B) {
	e := New(0.95, 100, time.Minute)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := 2 * time.Millisecond
		for pb.Next() {
			e.Record(d, now)
			if d += 7 * time.Microsecond; d > 3*time.Millisecond {
				d = 2 * time.Millisecond
			}
		}
	})
}

// BenchmarkLatencyDelay is the cost of reading the hedge delay, which a
// hedged request does once.
func BenchmarkLatencyDelay(b *testing.B) {
	e := New(0.95, 100, time.Minute)
	now := time.Now()
	for range 1000 {
		e.Record(2*time.Millisecond, now)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := e.Delay(now); !ok {
				b.Fatal("no delay")
			}
		}
	})
}
