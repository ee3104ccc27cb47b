package httpretry

import (
	"sync/atomic"
	"time"
)

// windowSlots is the number of slots a window is divided into. One more is
// kept: the oldest, partly inside the window, whose counts fade out as the
// current slot fills, so that counts leave the window smoothly rather than
// a slot's worth at a time.
const windowSlots = 10

// windowCounters is how many counters each slot holds.
const windowCounters = 3

// window counts events over a sliding window of time, with a resolution of
// a tenth of it. It is lock-free and allocation-free, accepts any time (before
// 1970 too), and takes the time as an argument so that simulations can
// drive it on a virtual clock. Counts at a slot boundary are approximate by
// the few events that race with the slot's reset.
type window struct {
	slot  int64 // nanoseconds per slot, ≥ 1
	slots [windowSlots + 1]windowSlot
}

type windowSlot struct {
	epoch atomic.Int64 // which slot-length interval the counts belong to
	n     [windowCounters]atomic.Int64
}

// newWindow returns a window of length d; d ≤ 0 is treated as the
// smallest window.
func newWindow(d time.Duration) window {
	return window{slot: max(int64(d)/windowSlots, 1)}
}

// epoch returns the slot-length interval that now falls in, rounding
// towards minus infinity, and how far into it now is, in [0, 1).
func (w *window) epoch(now time.Time) (int64, float64) {
	slot := max(w.slot, 1) // the zero window, as in a zero RatioBudget: the smallest
	ns := now.UnixNano()
	return floorDiv(ns, slot), float64(mod(ns, slot)) / float64(slot)
}

// add adds d to counter i at time now.
func (w *window) add(now time.Time, i int, d int64) {
	e, _ := w.epoch(now)
	s := &w.slots[mod(e, windowSlots+1)]
	if old := s.epoch.Load(); old != e && s.epoch.CompareAndSwap(old, e) {
		for j := range s.n {
			s.n[j].Store(0)
		}
	}
	s.n[i].Add(d)
}

// take takes one back from counter i in the newest slot that the window
// ending at now still sees with a positive count, and reports whether
// there was one: an event counted earlier in the window is uncounted
// where it was counted, so that no slot goes below zero.
func (w *window) take(now time.Time, i int) bool {
	e, _ := w.epoch(now)
	for back := int64(0); back <= windowSlots; back++ {
		s := &w.slots[mod(e-back, windowSlots+1)]
		if s.epoch.Load() != e-back {
			continue
		}
		for {
			n := s.n[i].Load()
			if n <= 0 {
				break
			}
			if s.n[i].CompareAndSwap(n, n-1) {
				return true
			}
		}
	}
	return false
}

// sums returns each counter's total over the window ending at now: the
// slots of the last windowSlots intervals, the current one partly elapsed,
// and the part of the oldest that the current one has not yet replaced.
func (w *window) sums(now time.Time) (sums [windowCounters]float64) {
	e, into := w.epoch(now)
	for i := range w.slots {
		s := &w.slots[i]
		weight := 1.0
		switch ep := s.epoch.Load(); {
		case ep == e-windowSlots:
			weight = 1 - into
		case ep < e-windowSlots || ep > e:
			continue
		}
		for j := range s.n {
			sums[j] += weight * float64(s.n[j].Load())
		}
	}
	return sums
}

// any reports whether f holds for a slot the window ending at now still
// sees, the fading oldest one included.
func (w *window) any(now time.Time, f func(n *[windowCounters]atomic.Int64) bool) bool {
	e, _ := w.epoch(now)
	for k := range w.slots {
		s := &w.slots[k]
		if ep := s.epoch.Load(); ep >= e-windowSlots && ep <= e && f(&s.n) {
			return true
		}
	}
	return false
}

// floorDiv divides a by n > 0, rounding towards minus infinity.
func floorDiv(a, n int64) int64 {
	q := a / n
	if a%n < 0 {
		q--
	}
	return q
}

func mod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}
