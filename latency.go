package httpretry

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The latency estimator's histogram: log-linear buckets over nanoseconds,
// 2^latencySubBits per power of two, so a bucket spans 12.5 % of its lower
// bound and an interpolated quantile is within about 6 % of the true one.
const (
	latencySubBits = 3
	latencyMinExp  = 12 // 2^12 ns ≈ 4 µs: shorter samples share the first bucket
	latencyOctaves = 24 // up to 2^36 ns ≈ 69 s: longer samples share the last bucket
	latencyBuckets = latencyOctaves << latencySubBits

	// latencyWindow is the number of samples in a window. The estimate
	// reads the window being filled and the one before it, so it rests on
	// 512 to 1,024 recent samples and forgets a sample after at most
	// 1,024 more.
	latencyWindow = 512

	// The cached hedge delay, which is what the hot path reads, is
	// recomputed every latencyRefresh samples and at least once per
	// latencyGrain while samples arrive. Recomputing reads the whole
	// histogram (a few hundred nanoseconds), so the period keeps its share
	// of a sample's cost to a few nanoseconds at high rates, while the
	// grain keeps the delay current at low ones.
	latencyRefresh = 128
	latencyGrain   = 100 * time.Millisecond

	// latencyMedianFactor sets the delay's lower bound, this many times the
	// median (see latencyEstimator).
	latencyMedianFactor = 2
)

// latencyEstimator estimates one host's attempt latency distribution from a
// stream of samples and derives the delay after which a hedge is sent: the
// host's q-quantile, but never less than twice its median, and none before
// minSamples samples.
//
// The median bound keeps hedges for attempts that are stuck rather than
// merely slow: a hedge sent at d answers at about d plus the median, so when
// the quantile is close to the median (a tight distribution) an attempt past
// it would almost always finish before its hedge, and hedging it only adds
// load. When the distribution has a long tail, the quantile is the larger.
//
// Samples go into a histogram of three windows of latencyWindow samples
// each: the window being filled, the previous one, and the next one, which
// is cleared when the current one starts, so that no writer ever races a
// clear. Recording is two atomic additions and a load, with no lock and no
// allocation; every latencyRefresh samples, one caller recomputes the delay
// from the two live windows and caches it for delay, a single load.
//
// An estimator that has recorded nothing for maxIdle answers as a new one
// does (no delay) and restarts from nothing on its next sample, so the
// per-host table may drop it then without changing any behaviour.
//
// Which samples to record is the caller's part, and it decides whether the
// estimate means anything. Record the first attempt of each request only:
// one sample per request, whatever its fate. A first attempt that answered
// acceptably (a response that is not retried) is an exact sample, record;
// one cut short after elapsed (a hedge won, the caller gave up, the attempt
// timed out) is censored, recordCensored: its latency is only known to
// exceed elapsed. Hedges and retries are not recorded: they are sent when
// the host is slow, so they would over-sample its slow moments.
type latencyEstimator struct {
	// Read on every hedged request, written every latencyRefresh samples.
	delayNS atomic.Int64 // the cached hedge delay; 0 while there is none
	last    atomic.Int64 // Unix ns of a recent sample, within latencyGrain; 0 before the first

	q          float64
	minSamples uint64
	maxIdle    int64 // ns
	_          [64]byte

	seq     atomic.Uint64 // samples recorded; seq/latencyWindow numbers the current window
	_       [56]byte
	windows [3][latencyBuckets]atomic.Uint32
}

// newLatencyEstimator returns an empty estimator of the q-quantile
// (0 < q < 1) that derives a delay once it holds minSamples samples, and
// forgets everything after maxIdle without a sample.
func newLatencyEstimator(q float64, minSamples int, maxIdle time.Duration) *latencyEstimator {
	return &latencyEstimator{q: q, minSamples: uint64(max(minSamples, 1)), maxIdle: int64(maxIdle)}
}

// record adds an exact sample: an attempt that answered after d.
func (e *latencyEstimator) record(d time.Duration, now time.Time) {
	fresh := e.touch(now)
	s := e.seq.Add(1) - 1
	w := s / latencyWindow
	e.windows[w%3][latencyBucket(d)].Add(1)
	if s%latencyWindow == 0 {
		next := &e.windows[(w+1)%3]
		for i := range next {
			next[i].Store(0)
		}
	}
	if fresh || (s+1)%latencyRefresh == 0 || s+1 == e.minSamples {
		e.refresh()
	}
}

// recordCensored adds an attempt that was cut short after elapsed, whose
// latency is therefore more than elapsed. When elapsed is at least the
// current delay, the sample is above every quantile the delay is made of
// and its exact value does not matter to them: it is recorded as elapsed.
// Otherwise it says almost nothing about them and is dropped. Recording it
// as elapsed would drag the estimate down (a hedge cancelled a moment after
// it was sent would count as a very fast answer); dropping every censored
// sample would remove the tail that hedging cuts off, and the delay would
// fall, hedge more, and fall again.
func (e *latencyEstimator) recordCensored(elapsed time.Duration, now time.Time) {
	if d := e.delayNS.Load(); d > 0 && int64(elapsed) >= d && !e.expired(now) {
		e.record(elapsed, now)
	}
}

// delay returns the hedge delay, and false while the estimator holds fewer
// than minSamples samples or has been idle for maxIdle.
func (e *latencyEstimator) delay(now time.Time) (time.Duration, bool) {
	d := e.delayNS.Load()
	if d <= 0 || e.expired(now) {
		return 0, false
	}
	return time.Duration(d), true
}

// atRest reports whether the estimator would behave exactly as a new one:
// it never recorded a sample or has been idle for maxIdle.
func (e *latencyEstimator) atRest(now time.Time) bool {
	return e.last.Load() == 0 || e.expired(now)
}

// latencySnapshot is what an estimator knows at one moment.
type latencySnapshot struct {
	Samples  int           // samples the estimate rests on
	P50, P95 time.Duration // quantiles of those samples; 0 without samples
	P99      time.Duration
	Delay    time.Duration // the hedge delay; 0 while there is none
}

// snapshot returns the estimator's state, computed afresh from the
// histogram; it costs a few hundred nanoseconds.
func (e *latencyEstimator) snapshot(now time.Time) latencySnapshot {
	if e.atRest(now) {
		return latencySnapshot{}
	}
	var h latencyHistogram
	total := e.collect(&h)
	s := latencySnapshot{Samples: int(total)}
	if total > 0 {
		s.P50, s.P95, s.P99 = h.quantile(total, 0.5), h.quantile(total, 0.95), h.quantile(total, 0.99)
	}
	s.Delay, _ = e.delay(now)
	return s
}

func (e *latencyEstimator) expired(now time.Time) bool {
	l := e.last.Load()
	return l != 0 && now.UnixNano()-l > e.maxIdle
}

// touch notes a sample at now, and empties the estimator first when it had
// been idle for maxIdle. It reports whether the delay is due for a refresh:
// the last note is latencyGrain old.
func (e *latencyEstimator) touch(now time.Time) bool {
	n := now.UnixNano()
	l := e.last.Load()
	if n-l < int64(latencyGrain) || !e.last.CompareAndSwap(l, n) {
		return false
	}
	if l != 0 && n-l > e.maxIdle {
		e.delayNS.Store(0)
		for w := range e.windows {
			for i := range e.windows[w] {
				e.windows[w][i].Store(0)
			}
		}
	}
	return true
}

// refresh recomputes the cached delay from the two live windows.
func (e *latencyEstimator) refresh() {
	var h latencyHistogram
	total := e.collect(&h)
	if total < e.minSamples {
		e.delayNS.Store(0)
		return
	}
	e.delayNS.Store(int64(h.delay(total, e.q)))
}

// delayAt is delay for the q-quantile and minSamples of one request: the
// cached delay when they are the estimator's own, else one computed afresh
// from the histogram, which costs a few hundred nanoseconds.
func (e *latencyEstimator) delayAt(now time.Time, q float64, minSamples int) (time.Duration, bool) {
	if q == e.q && uint64(max(minSamples, 1)) == e.minSamples {
		return e.delay(now)
	}
	if e.atRest(now) {
		return 0, false
	}
	var h latencyHistogram
	total := e.collect(&h)
	if total == 0 || total < uint64(max(minSamples, 1)) {
		return 0, false
	}
	return h.delay(total, q), true
}

// latencyHistogram is the sum of the live windows.
type latencyHistogram [latencyBuckets]uint32

// collect sums the current and the previous window into h and returns the
// number of samples in it.
func (e *latencyEstimator) collect(h *latencyHistogram) uint64 {
	n := e.seq.Load()
	if n == 0 {
		return 0
	}
	w := (n - 1) / latencyWindow // the window of the last sample
	cur, prev := &e.windows[w%3], &e.windows[(w+2)%3]
	var total uint64
	for i := range h {
		h[i] = cur[i].Load() + prev[i].Load()
		total += uint64(h[i])
	}
	return total
}

// delay returns the hedge delay of the total samples in h: their
// q-quantile, but at least latencyMedianFactor times their median, and
// at least 1 ns.
func (h *latencyHistogram) delay(total uint64, q float64) time.Duration {
	d := max(h.quantile(total, q), latencyMedianFactor*h.quantile(total, 0.5))
	return max(d, 1)
}

// quantile returns the q-quantile of the total samples in h, interpolated
// linearly within its bucket.
func (h *latencyHistogram) quantile(total uint64, q float64) time.Duration {
	rank := q * float64(total)
	var below float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if below+float64(c) >= rank {
			lo, width := latencyBucketBounds(i)
			return time.Duration(float64(lo) + math.Round(float64(width)*(rank-below)/float64(c)))
		}
		below += float64(c)
	}
	lo, width := latencyBucketBounds(latencyBuckets - 1)
	return time.Duration(lo + width)
}

// latencyBucket returns the bucket that holds d.
func latencyBucket(d time.Duration) int {
	v := uint64(max(d, 1<<latencyMinExp))
	e := bits.Len64(v) - 1 // v is in [2^e, 2^(e+1))
	if e >= latencyMinExp+latencyOctaves {
		return latencyBuckets - 1
	}
	sub := int(v>>(e-latencySubBits)) & (1<<latencySubBits - 1)
	return (e-latencyMinExp)<<latencySubBits | sub
}

// latencyBucketBounds returns the lower bound and the width of bucket i, in
// nanoseconds.
func latencyBucketBounds(i int) (lo, width int64) {
	e := i>>latencySubBits + latencyMinExp
	sub := int64(i & (1<<latencySubBits - 1))
	width = 1 << (e - latencySubBits)
	return (1<<latencySubBits + sub) * width, width
}
