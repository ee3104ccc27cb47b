package httpretry

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// RatioConfig configures a RatioBudget. Zero fields take the defaults.
type RatioConfig struct {
	// Ratio is the largest share of retries among requests in the window;
	// 0 means 0.1, the SRE book's per-client budget.
	Ratio float64
	// Window is the sliding window the ratio is measured over, with a
	// resolution of one tenth of it; 0 means 10 s.
	Window time.Duration
	// MinPerSecond is a floor of retries per second always allowed, so that
	// a host with little traffic can still retry; 0 means 1. A negative
	// value means no floor.
	MinPerSecond float64
}

// ratioSlots is the number of buckets the window is divided into. One more
// is kept: the oldest, partly inside the window, whose counts fade out as
// the current slot fills, so the allowance is released smoothly rather than
// a slot's worth at a time.
const ratioSlots = 10

// RatioBudget allows a retry while retries in the sliding window stay below
// Ratio × requests in it, or below the MinPerSecond floor. Under sustained
// total failure, attempts per request settle at about 1 + Ratio. It is safe
// for concurrent use and lock-free; counts at a slot boundary are
// approximate by a few requests.
//
// The methods of the Budget interface read the clock; their At forms take
// the time instead, for simulations on a virtual clock, as
// golang.org/x/time/rate's AllowN does. Any time.Time is accepted, before
// 1970 included.
type RatioBudget struct {
	ratio, floor float64
	slot         time.Duration
	slots        [ratioSlots + 1]ratioSlot
}

type ratioSlot struct {
	epoch   atomic.Int64 // which slot-length interval since the Unix epoch the counts belong to
	reqs    atomic.Int64
	retries atomic.Int64
}

// NewRatioBudget returns an empty ratio budget. Nonsense values (NaN,
// negative ratio or window) are treated as zero, which selects the default.
func NewRatioBudget(c RatioConfig) *RatioBudget {
	ratio := c.Ratio
	if !(ratio > 0) || math.IsInf(ratio, 0) {
		ratio = 0.1
	}
	window := c.Window
	if window <= 0 {
		window = 10 * time.Second
	}
	floor := c.MinPerSecond
	switch {
	case floor == 0 || math.IsNaN(floor):
		floor = 1
	case floor < 0:
		floor = 0
	}
	return &RatioBudget{
		ratio: ratio,
		floor: min(floor, math.MaxFloat64/window.Seconds()) * window.Seconds(),
		slot:  max(window/ratioSlots, time.Nanosecond),
	}
}

// epoch returns the index of the slot-length interval holding now, rounded
// towards minus infinity so that times before 1970 work too.
func (b *RatioBudget) epoch(now time.Time) (e int64, into float64) {
	ns, slot := now.UnixNano(), int64(b.slot)
	e, r := ns/slot, ns%slot
	if r < 0 {
		e, r = e-1, r+slot
	}
	return e, float64(r) / float64(slot)
}

func (b *RatioBudget) current(e int64) *ratioSlot {
	i := e % (ratioSlots + 1)
	if i < 0 {
		i += ratioSlots + 1
	}
	s := &b.slots[i]
	if old := s.epoch.Load(); old != e && s.epoch.CompareAndSwap(old, e) {
		s.reqs.Store(0)
		s.retries.Store(0)
	}
	return s
}

// window returns the requests and retries in the window ending at epoch e,
// a fraction into of the way through its slot.
func (b *RatioBudget) window(e int64, into float64) (reqs, retries float64) {
	// The window is the last ratioSlots slots: the current one, partly
	// elapsed, the full ones before it, and the part of the oldest that the
	// current one has not yet replaced.
	fade := 1 - into
	for i := range b.slots {
		s := &b.slots[i]
		w := 1.0
		switch ep := s.epoch.Load(); {
		case ep == e-ratioSlots:
			w = fade
		case ep <= e-ratioSlots || ep > e:
			continue
		}
		reqs += w * float64(s.reqs.Load())
		retries += w * float64(s.retries.Load())
	}
	return reqs, retries
}

// Begin counts a request now.
func (b *RatioBudget) Begin() { b.BeginAt(time.Now()) }

// BeginAt counts a request at now.
func (b *RatioBudget) BeginAt(now time.Time) {
	e, _ := b.epoch(now)
	b.current(e).reqs.Add(1)
}

// AllowRetry counts and allows a retry now if the window has room for it.
func (b *RatioBudget) AllowRetry(timeout bool) bool { return b.AllowRetryAt(time.Now(), timeout) }

// AllowRetryAt counts and allows a retry at now if the window has room for
// it.
func (b *RatioBudget) AllowRetryAt(now time.Time, _ bool) bool {
	e, into := b.epoch(now)
	cur := b.current(e)
	reqs, retries := b.window(e, into)
	if retries >= max(b.ratio*reqs, b.floor) {
		return false
	}
	cur.retries.Add(1)
	return true
}

// Refund uncounts a retry that was allowed but not sent.
func (b *RatioBudget) Refund(timeout bool) { b.RefundAt(time.Now(), timeout) }

// RefundAt uncounts, at now, a retry that was allowed but not sent.
func (b *RatioBudget) RefundAt(now time.Time, _ bool) {
	e, _ := b.epoch(now)
	for i := range ratioSlots + 1 {
		s := &b.slots[((e-int64(i))%(ratioSlots+1)+ratioSlots+1)%(ratioSlots+1)]
		if s.epoch.Load() != e-int64(i) {
			continue
		}
		for {
			n := s.retries.Load()
			if n <= 0 {
				break
			}
			if s.retries.CompareAndSwap(n, n-1) {
				return
			}
		}
	}
}

// Succeeded does nothing: the ratio counts requests, not outcomes.
func (b *RatioBudget) Succeeded(bool, bool) {}

// Level returns the retries the window still allows now and the window's
// allowance.
func (b *RatioBudget) Level() (available, capacity float64) {
	return b.LevelAt(time.Now())
}

// LevelAt returns the retries the window allows at now and its allowance.
func (b *RatioBudget) LevelAt(now time.Time) (available, capacity float64) {
	reqs, retries := b.window(b.epoch(now))
	capacity = max(b.ratio*reqs, b.floor)
	return max(capacity-retries, 0), capacity
}

// String describes the budget's state, as logged with each attempt.
func (b *RatioBudget) String() string {
	avail, capacity := b.Level()
	return fmt.Sprintf("ratio %.2f, %.0f/%.0f retries left", b.ratio, avail, capacity)
}

// idle reports whether no retry is counted in the window at now: the
// budget then allows what a new one would.
func (b *RatioBudget) idle(now time.Time) bool {
	_, retries := b.window(b.epoch(now))
	return retries == 0
}
