// Package window counts events over a sliding window of time, for the
// per-host mechanisms that need recent rates: adaptive throttling and the
// ratio budget.
package window

import (
	"sync/atomic"
	"time"
)

// Slots is the number of slots a window is divided into. One more is
// kept: the oldest, partly inside the window, whose counts fade out as the
// current slot fills, so that counts leave the window smoothly rather than
// a slot's worth at a time.
const Slots = 10

// Counters is how many counters each slot holds.
const Counters = 3

// Window counts events over a sliding window of time, with a resolution of
// a tenth of it. It is lock-free and allocation-free, accepts any time (before
// 1970 too), and takes the time as an argument so that simulations can
// drive it on a virtual clock. Counts at a slot boundary are approximate by
// the few events that race with the slot's reset.
type Window struct {
	slot  int64 // nanoseconds per slot, ≥ 1
	slots [Slots + 1]slot
}

type slot struct {
	epoch atomic.Int64 // which slot-length interval the counts belong to
	n     [Counters]atomic.Int64
}

// New returns a window of length d; d ≤ 0 is treated as the
// smallest window.
func New(d time.Duration) Window {
	return Window{slot: max(int64(d)/Slots, 1)}
}

// epoch returns the slot-length interval that now falls in, rounding
// towards minus infinity, and how far into it now is, in [0, 1).
func (w *Window) epoch(now time.Time) (int64, float64) {
	slot := max(w.slot, 1) // the zero window, as in a zero RatioBudget: the smallest
	ns := now.UnixNano()
	return FloorDiv(ns, slot), float64(Mod(ns, slot)) / float64(slot)
}

// Add adds d to counter i at time now.
func (w *Window) Add(now time.Time, i int, d int64) {
	e, _ := w.epoch(now)
	s := &w.slots[Mod(e, Slots+1)]
	if old := s.epoch.Load(); old != e && s.epoch.CompareAndSwap(old, e) {
		for j := range s.n {
			s.n[j].Store(0)
		}
	}
	s.n[i].Add(d)
}

// Take takes one back from counter i in the newest slot that the window
// ending at now still sees with a positive count, and reports whether
// there was one: an event counted earlier in the window is uncounted
// where it was counted, so that no slot goes below zero.
func (w *Window) Take(now time.Time, i int) bool {
	e, _ := w.epoch(now)
	for back := int64(0); back <= Slots; back++ {
		s := &w.slots[Mod(e-back, Slots+1)]
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

// Sums returns each counter's total over the window ending at now: the
// slots of the last Slots intervals, the current one partly elapsed,
// and the part of the oldest that the current one has not yet replaced.
func (w *Window) Sums(now time.Time) (sums [Counters]float64) {
	e, into := w.epoch(now)
	for i := range w.slots {
		s := &w.slots[i]
		weight := 1.0
		switch ep := s.epoch.Load(); {
		case ep == e-Slots:
			weight = 1 - into
		case ep < e-Slots || ep > e:
			continue
		}
		for j := range s.n {
			sums[j] += weight * float64(s.n[j].Load())
		}
	}
	return sums
}

// Any reports whether f holds for a slot the window ending at now still
// sees, the fading oldest one included.
func (w *Window) Any(now time.Time, f func(n *[Counters]atomic.Int64) bool) bool {
	e, _ := w.epoch(now)
	for k := range w.slots {
		s := &w.slots[k]
		if ep := s.epoch.Load(); ep >= e-Slots && ep <= e && f(&s.n) {
			return true
		}
	}
	return false
}

// FloorDiv divides a by n > 0, rounding towards minus infinity.
func FloorDiv(a, n int64) int64 {
	q := a / n
	if a%n < 0 {
		q--
	}
	return q
}

// Span is how long a count stays in w: its length and the fading slot.
func (w *Window) Span() int64 { return w.slot * (Slots + 1) }

// Mod returns a modulo n > 0, in [0, n).
func Mod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}
