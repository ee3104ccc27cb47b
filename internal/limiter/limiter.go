// Package limiter is the adaptive concurrency limit of one host: AIMD on
// the outcome signals of its attempts, with a FIFO waiting room.
package limiter

import (
	"context"
	"errors"
	"github.com/seedhq/httpretry/internal/signal"
	"github.com/seedhq/httpretry/internal/window"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a limiter. Zero fields take the defaults;
// nonsense values are treated as zero.
type Config struct {
	// Max is the limit a fresh limiter starts from and the ceiling it
	// grows back to. 0 means 1000, Envoy's adaptive-concurrency ceiling.
	Max int
	// Min is the floor the limit never falls below. 0 means 1.
	Min int
	// Backoff is the multiplicative decrease: after an overload signal
	// the limit becomes Backoff × the attempts then in flight. 0 means 0.5,
	// TCP's halving (RFC 5681 sets ssthresh from the flight size, too).
	Backoff float64
	// Queue is how many attempts may wait for a slot, each for as long as
	// its context allows. 0 means as many as the current limit, so that a
	// burst waits about one round of the host's work at most; negative
	// means none: an attempt over the limit fails at once with
	// ErrFull.
	Queue int
	// Forget is how long after its last decrease an idle limiter returns
	// to Max, as a fresh one would start. 0 means 30 s.
	Forget time.Duration
}

// Limiter is the adaptive concurrency limit of one host: AIMD on the
// outcome signals of its attempts, after Netflix's concurrency-limits
// AIMDLimit and TCP congestion control (RFC 5681). It starts at Max, so
// that a host that never shows overload is never limited.
//
// An overloaded outcome (a refusal or a timeout) cuts the limit to
// Backoff × the attempts in flight, at most once per episode: attempts
// that started before the last cut belong to the episode that caused it
// and do not cut again. So does a slow answer: one that took more than
// half of the time its attempt had (the attempt timeout or the caller's
// deadline, whichever was nearer) and more than twice the fastest answer
// of the last Forget or two, so that the limit comes down while answers
// still arrive in time, before the host's queue holds work nobody waits
// for any more, but not for a host that is simply that slow. An accepted
// outcome while at least half the limit is in use raises it by one, as in
// AIMDLimit: the limit doubles in a round trip while there is demand for
// it, so that a cut from an isolated failure heals at once, and it never
// grows far past what is used.
//
// Attempts over the limit wait in a FIFO queue of at most Queue, each
// until a slot frees or its context ends, or with a negative Queue fail
// at once. A nil *limiter admits everything. It is safe for concurrent
// use; admission without waiting is lock-free and allocates nothing.
type Limiter struct {
	min, max, backoff float64
	queueCap          int   // 0: as many as the limit; negative: none
	forget            int64 // nanoseconds

	limit    atomic.Uint64 // float64 bits
	inflight atomic.Int64
	waiting  atomic.Int64  // attempts queued or about to queue
	lastCut  atomic.Int64  // UnixNano of the last decrease; math.MinInt64 before any
	rejected atomic.Uint64 // attempts refused since creation, those whose wait ended included, for Stats
	// The fastest answers, in two buckets of Forget each: the current and
	// the last, so that the minimum forgets a past that no longer holds.
	rtts [2]struct{ epoch, ns atomic.Int64 }

	mu    sync.Mutex
	queue []chan struct{} // guarded by mu; a slot is handed over by closing
}

// ErrFull is Acquire's refusal: the limit is reached and the waiting room
// is full, or there is none.
var ErrFull = errors.New("concurrency limit reached")

// MaxLimit is the largest limit a limiter keeps: larger ones behave the
// same.
const MaxLimit = 1 << 53

func New(c Config) *Limiter {
	maxL := c.Max
	if maxL <= 0 {
		maxL = 1000
	}
	// The limit is a float64 that is compared as an int64: saturate where
	// both hold it exactly. No host has 2^53 attempts in flight.
	maxL = int(min(int64(maxL), MaxLimit))
	minL := min(max(c.Min, 1), maxL)
	backoff := c.Backoff
	if !(backoff > 0 && backoff < 1) {
		backoff = 0.5
	}
	queue := c.Queue // 0: as many as the limit
	forget := c.Forget
	if forget <= 0 {
		forget = 30 * time.Second
	}
	l := &Limiter{min: float64(minL), max: float64(maxL), backoff: backoff, queueCap: queue, forget: int64(forget)}
	l.limit.Store(math.Float64bits(l.max))
	l.lastCut.Store(math.MinInt64)
	for i := range l.rtts {
		l.rtts[i].epoch.Store(math.MinInt64)
	}
	return l
}

func (l *Limiter) current() float64 { return math.Float64frombits(l.limit.Load()) }

// tryInc takes a slot if one is free.
func (l *Limiter) tryInc() bool {
	capacity := int64(l.current())
	for {
		n := l.inflight.Load()
		if n >= capacity {
			return false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// TryAcquire takes a slot at now if one is free and nobody is waiting,
// without waiting: for hedges, which are worth sending only at once.
func (l *Limiter) TryAcquire(now time.Time) bool {
	if l == nil {
		return true
	}
	l.refresh(now)
	if l.waiting.Load() == 0 && l.tryInc() {
		return true
	}
	l.rejected.Add(1)
	return false
}

// Acquire takes a slot for an attempt starting at now, waiting in the
// queue if the limit is reached. It returns ErrConcurrencyLimit when the
// queue is full or there is none, and the context's cause when ctx ends
// first. Every nil return must be paired with a release.
func (l *Limiter) Acquire(ctx context.Context, now time.Time) error {
	if l == nil {
		return nil
	}
	l.refresh(now)
	if l.waiting.Load() == 0 && l.tryInc() {
		return nil
	}
	if l.queueCap < 0 {
		l.rejected.Add(1)
		return ErrFull
	}
	l.mu.Lock()
	// Announce the wait before the last look, so that a release racing
	// with it either leaves the slot to that look or sees the waiter.
	l.waiting.Add(1)
	if len(l.queue) == 0 && l.tryInc() {
		l.waiting.Add(-1)
		l.mu.Unlock()
		return nil
	}
	capacity := l.queueCap
	if capacity == 0 {
		capacity = int(l.current())
	}
	if len(l.queue) >= capacity {
		l.waiting.Add(-1)
		l.mu.Unlock()
		l.rejected.Add(1)
		return ErrFull
	}
	ready := make(chan struct{})
	l.queue = append(l.queue, ready)
	l.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	l.rejected.Add(1)
	l.mu.Lock()
	if i := slices.Index(l.queue, ready); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		l.waiting.Add(-1)
		l.mu.Unlock()
		return context.Cause(ctx)
	}
	l.mu.Unlock()
	l.inflight.Add(-1) // handed a slot as the context ended: give it back
	l.handOff()
	return context.Cause(ctx)
}

// Release returns the slot of an attempt that started at start and ended
// at now with signal s, and adjusts the limit. patience is how long the
// attempt could wait when it started: its timeout or its caller's
// deadline, whichever was nearer; 0 for neither.
func (l *Limiter) Release(start, now time.Time, s signal.Signal, patience time.Duration) {
	if l == nil {
		return
	}
	n := float64(l.inflight.Add(-1) + 1) // in flight when the attempt ended, itself included
	if s == signal.Accepted {
		rtt := int64(now.Sub(start))
		l.noteRTT(now, rtt)
		if patience > 0 && rtt > int64(patience)/2 && rtt/2 > l.fastest(now) {
			s = signal.Overloaded // in time, but only just: the host is queueing
		}
	}
	switch s {
	case signal.Accepted:
		for {
			old := l.limit.Load()
			lim := math.Float64frombits(old)
			if lim >= l.max || n < lim/2 {
				break
			}
			if l.limit.CompareAndSwap(old, math.Float64bits(min(lim+1, l.max))) {
				break
			}
		}
	case signal.Overloaded:
		for {
			last := l.lastCut.Load()
			if start.UnixNano() <= last {
				break // this episode has had its cut
			}
			old := l.limit.Load()
			lim := math.Float64frombits(old)
			cut := max(l.min, l.backoff*min(lim, n))
			if cut >= lim {
				break
			}
			if l.lastCut.CompareAndSwap(last, now.UnixNano()) {
				l.limit.Store(math.Float64bits(cut))
				break
			}
		}
	}
	l.handOff()
}

// noteRTT records the round trip of an accepted answer.
func (l *Limiter) noteRTT(now time.Time, rtt int64) {
	e := window.FloorDiv(now.UnixNano(), l.forget)
	b := &l.rtts[window.Mod(e, 2)]
	if old := b.epoch.Load(); old != e && b.epoch.CompareAndSwap(old, e) {
		b.ns.Store(math.MaxInt64)
	}
	for {
		v := b.ns.Load()
		if rtt >= v || b.ns.CompareAndSwap(v, rtt) {
			return
		}
	}
}

// fastest returns the shortest round trip recorded in the current bucket
// and the one before it.
func (l *Limiter) fastest(now time.Time) int64 {
	e := window.FloorDiv(now.UnixNano(), l.forget)
	fastest := int64(math.MaxInt64)
	for i := range l.rtts {
		b := &l.rtts[i]
		if ep := b.epoch.Load(); ep == e || ep == e-1 {
			fastest = min(fastest, b.ns.Load())
		}
	}
	return fastest
}

// handOff gives free slots to waiting attempts, oldest first.
func (l *Limiter) handOff() {
	if l.waiting.Load() == 0 {
		return
	}
	l.mu.Lock()
	for len(l.queue) > 0 && l.tryInc() {
		close(l.queue[0])
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.waiting.Add(-1)
	}
	if len(l.queue) == 0 {
		l.queue = nil // let a burst's backing array go
	}
	l.mu.Unlock()
}

// refresh returns an idle limiter whose last cut is older than Forget to
// Max, where a fresh one starts.
func (l *Limiter) refresh(now time.Time) {
	if l.inflight.Load() != 0 {
		return
	}
	last := l.lastCut.Load()
	if last == math.MinInt64 || now.UnixNano()-last < l.forget || l.current() >= l.max {
		return
	}
	if l.lastCut.CompareAndSwap(last, math.MinInt64) {
		l.limit.Store(math.Float64bits(l.max))
	}
}

// AtRest reports whether the limiter behaves as a fresh one would: nothing
// in flight or waiting, and its limit at Max or about to return there.
func (l *Limiter) AtRest(now time.Time) bool {
	if l == nil {
		return true
	}
	if l.inflight.Load() != 0 || l.waiting.Load() != 0 {
		return false
	}
	last := l.lastCut.Load()
	return l.current() >= l.max || last == math.MinInt64 || now.UnixNano()-last >= l.forget
}

// Busy reports whether attempts hold a slot or wait for one.
func (l *Limiter) Busy() bool {
	return l != nil && (l.inflight.Load() != 0 || l.waiting.Load() != 0)
}

// Stats is a snapshot of one host's concurrency limit.
type Stats struct {
	Limit    float64 // the current limit
	InFlight int64   // attempts holding a slot
	Waiting  int64   // attempts queued for one
	Rejected uint64  // attempts refused since the limiter was created
}

// Snapshot reports the limiter at now: an idle limiter whose last cut is
// older than Forget reports Max, as the next attempt will find it.
func (l *Limiter) Snapshot(now time.Time) Stats {
	if l == nil {
		return Stats{}
	}
	l.refresh(now)
	return Stats{Limit: l.current(), InFlight: l.inflight.Load(), Waiting: l.waiting.Load(), Rejected: l.rejected.Load()}
}
