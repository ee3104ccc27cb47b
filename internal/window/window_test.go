package window

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWindowSlidesAndFades(t *testing.T) {
	t.Parallel()
	w := New(10 * time.Second) // slots of 1 s
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 10 {
		w.Add(t0.Add(time.Duration(i)*time.Second), 0, 10)
	}
	if got := w.Sums(t0.Add(9 * time.Second))[0]; got != 100 {
		t.Fatalf("ten full slots: %v, want 100", got)
	}
	// Half-way into the eleventh second, the first slot counts for half.
	if got := w.Sums(t0.Add(10*time.Second + 500*time.Millisecond))[0]; got != 95 {
		t.Errorf("fading oldest slot: %v, want 95", got)
	}
	if got := w.Sums(t0.Add(11 * time.Second))[0]; got != 90 {
		t.Errorf("after the first slot left: %v, want 90", got)
	}
	if got := w.Sums(t0.Add(30 * time.Second))[0]; got != 0 {
		t.Errorf("long after: %v, want 0", got)
	}
	// A slot reused a window later starts from zero.
	w.Add(t0.Add(11*time.Second), 1, 1)
	if got := w.Sums(t0.Add(11 * time.Second)); got[0] != 90 || got[1] != 1 {
		t.Errorf("reused slot: %v, want [90 1 0]", got)
	}
}

func TestWindowAnyTime(t *testing.T) {
	t.Parallel()
	for _, now := range []time.Time{{}, time.Unix(-5, -1), time.Unix(0, 0), time.Unix(0, math.MinInt64), time.Unix(1<<40, 0)} {
		w := New(time.Second)
		w.Add(now, 2, 3)
		if got := w.Sums(now)[2]; got != 3 {
			t.Errorf("at %v: %v, want 3", now, got)
		}
		if !w.Any(now, func(n *[Counters]atomic.Int64) bool { return n[2].Load() == 3 }) {
			t.Errorf("at %v: the slot is not seen", now)
		}
	}
	w := New(0) // the smallest window still counts
	w.Add(time.Unix(0, 7), 0, 1)
	if got := w.Sums(time.Unix(0, 7))[0]; got != 1 {
		t.Errorf("zero window: %v, want 1", got)
	}
}

func TestWindowConcurrent(t *testing.T) {
	t.Parallel()
	w := New(time.Minute)
	now := time.Unix(1_800_000_000, 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				w.Add(now, 0, 1)
				w.Sums(now)
			}
		})
	}
	wg.Wait()
	if got := w.Sums(now)[0]; got != 8000 {
		t.Errorf("%v, want 8000", got)
	}
}
