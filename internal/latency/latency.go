// Package latency estimates a host's attempt latency from a stream of
// samples and derives the delay after which a hedge is sent.
package latency

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

// Estimator estimates one host's attempt latency distribution from a
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
// Samples go into a histogram of two windows of latencyWindow samples each,
// the one being filled and the previous one. Each bucket carries, beside its
// count, the number of the window it counts for, and is emptied by the
// first sample of a newer window to reach it, in the same compare-and-swap
// that adds the sample. There is no separate clear to race: a writer that
// was preempted between taking its sample's number and adding it cannot
// land in a newer window (it finds a newer number and drops the sample), and
// no late clear can erase a newer window's samples. Readers count a bucket
// only when its number is the window they read. Recording is an atomic
// addition, a load and a compare-and-swap, with no lock and no allocation;
// every latencyRefresh samples, one caller recomputes the delay from the two
// windows and caches it for delay, a single load.
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
type Estimator struct {
	// Read on every hedged request, written every latencyRefresh samples.
	delayNS atomic.Int64 // the cached hedge delay; 0 while there is none
	last    atomic.Int64 // Unix ns of a recent sample, within latencyGrain; 0 before the first

	q          float64
	minSamples uint64
	maxIdle    int64 // ns
	_          [64]byte

	seq     atomic.Uint64 // samples recorded; seq/latencyWindow numbers the current window
	_       [56]byte
	windows [2][latencyBuckets]latencyCount // window w in windows[w%2]
}

// latencyCount is one bucket of one window: the window's number above
// latencyCountBits, its count of samples below.
type latencyCount struct{ v atomic.Uint64 }

// latencyCountBits holds a count up to latencyWindow, the most one window
// can give one bucket; the 54 bits above it number windows for longer than
// any process records samples.
const latencyCountBits = 10

var _ [1<<latencyCountBits - 1 - latencyWindow]struct{} // latencyWindow fits in latencyCountBits

// add counts a sample of window w, and drops it when the bucket already
// counts for a newer window: the sample's writer was preempted for a
// window or more after taking its number.
func (c *latencyCount) add(w uint64) {
	for {
		v := c.v.Load()
		next := w<<latencyCountBits | 1
		switch tag := v >> latencyCountBits; {
		case tag == w:
			next = v + 1
		case tag > w:
			return
		}
		if c.v.CompareAndSwap(v, next) {
			return
		}
	}
}

// in returns the bucket's count for window w: 0 when it counts for
// another.
func (c *latencyCount) in(w uint64) uint32 {
	v := c.v.Load()
	if v>>latencyCountBits != w {
		return 0
	}
	return uint32(v & (1<<latencyCountBits - 1))
}

// New returns an empty estimator of the q-quantile
// (0 < q < 1) that derives a delay once it holds minSamples samples, and
// forgets everything after maxIdle without a sample.
func New(q float64, minSamples int, maxIdle time.Duration) *Estimator {
	return &Estimator{q: q, minSamples: uint64(max(minSamples, 1)), maxIdle: int64(maxIdle)}
}

// Record adds an exact sample: an attempt that answered after d.
func (e *Estimator) Record(d time.Duration, now time.Time) {
	fresh := e.touch(now)
	s := e.seq.Add(1) - 1
	w := s / latencyWindow
	e.windows[w%2][latencyBucket(d)].add(w)
	if fresh || (s+1)%latencyRefresh == 0 || s+1 == e.minSamples {
		e.refresh()
	}
}

// RecordCensored adds an attempt that was cut short after elapsed, whose
// latency is therefore more than elapsed. When elapsed is at least the
// current delay, the sample is above every quantile the delay is made of
// and its exact value does not matter to them: it is recorded as elapsed.
// Otherwise it says almost nothing about them and is dropped. Recording it
// as elapsed would drag the estimate down (a hedge cancelled a moment after
// it was sent would count as a very fast answer); dropping every censored
// sample would remove the tail that hedging cuts off, and the delay would
// fall, hedge more, and fall again.
func (e *Estimator) RecordCensored(elapsed time.Duration, now time.Time) {
	if d := e.delayNS.Load(); d > 0 && int64(elapsed) >= d && !e.expired(now) {
		e.Record(elapsed, now)
	}
}

// Delay returns the hedge delay, and false while the estimator holds fewer
// than minSamples samples or has been idle for maxIdle.
func (e *Estimator) Delay(now time.Time) (time.Duration, bool) {
	d := e.delayNS.Load()
	if d <= 0 || e.expired(now) {
		return 0, false
	}
	return time.Duration(d), true
}

// AtRest reports whether the estimator would behave exactly as a new one:
// it never recorded a sample or has been idle for maxIdle.
func (e *Estimator) AtRest(now time.Time) bool {
	return e.last.Load() == 0 || e.expired(now)
}

// Snapshot is what an estimator knows at one moment.
type Snapshot struct {
	Samples  int           // samples the estimate rests on
	P50, P95 time.Duration // quantiles of those samples; 0 without samples
	P99      time.Duration
	Delay    time.Duration // the hedge delay; 0 while there is none
}

// Snapshot returns the estimator's state, computed afresh from the
// histogram; it costs a few hundred nanoseconds.
func (e *Estimator) Snapshot(now time.Time) Snapshot {
	if e.AtRest(now) {
		return Snapshot{}
	}
	var h latencyHistogram
	total := e.collect(&h)
	s := Snapshot{Samples: int(total)}
	if total > 0 {
		s.P50, s.P95, s.P99 = h.quantile(total, 0.5), h.quantile(total, 0.95), h.quantile(total, 0.99)
	}
	s.Delay, _ = e.Delay(now)
	return s
}

func (e *Estimator) expired(now time.Time) bool {
	l := e.last.Load()
	return l != 0 && now.UnixNano()-l > e.maxIdle
}

// touch notes a sample at now, and empties the estimator first when it had
// been idle for maxIdle. It reports whether the delay is due for a refresh:
// the last note is latencyGrain old.
func (e *Estimator) touch(now time.Time) bool {
	n := now.UnixNano()
	l := e.last.Load()
	if n-l < int64(latencyGrain) || !e.last.CompareAndSwap(l, n) {
		return false
	}
	if l != 0 && n-l > e.maxIdle {
		e.delayNS.Store(0)
		for w := range e.windows {
			for i := range e.windows[w] {
				e.windows[w][i].v.Store(0)
			}
		}
	}
	return true
}

// refresh recomputes the cached delay from the two live windows.
func (e *Estimator) refresh() {
	var h latencyHistogram
	total := e.collect(&h)
	if total < e.minSamples {
		e.delayNS.Store(0)
		return
	}
	e.delayNS.Store(int64(h.Delay(total, e.q)))
}

// DelayAt is delay for the q-quantile and minSamples of one request: the
// cached delay when they are the estimator's own, else one computed afresh
// from the histogram, which costs a few hundred nanoseconds.
func (e *Estimator) DelayAt(now time.Time, q float64, minSamples int) (time.Duration, bool) {
	if q == e.q && uint64(max(minSamples, 1)) == e.minSamples {
		return e.Delay(now)
	}
	if e.AtRest(now) {
		return 0, false
	}
	var h latencyHistogram
	total := e.collect(&h)
	if total == 0 || total < uint64(max(minSamples, 1)) {
		return 0, false
	}
	return h.Delay(total, q), true
}

// latencyHistogram is the sum of the live windows.
type latencyHistogram [latencyBuckets]uint32

// collect sums the current and the previous window into h and returns the
// number of samples in it.
func (e *Estimator) collect(h *latencyHistogram) uint64 {
	n := e.seq.Load()
	if n == 0 {
		return 0
	}
	w := (n - 1) / latencyWindow // the window of the last sample
	cur, prev := &e.windows[w%2], &e.windows[(w+1)%2]
	var total uint64
	for i := range h {
		h[i] = cur[i].in(w)
		if w > 0 {
			h[i] += prev[i].in(w - 1)
		}
		total += uint64(h[i])
	}
	return total
}

// Delay returns the hedge delay of the total samples in h: their
// q-quantile, but at least latencyMedianFactor times their median, and
// at least 1 ns.
func (h *latencyHistogram) Delay(total uint64, q float64) time.Duration {
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
