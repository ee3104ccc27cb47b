package limiter

import (
	"context"
	"errors"
	"github.com/seedhq/httpretry/internal/signal"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hold takes n slots at now and fails the test if one is refused.
// t0 is an instant for the tests, well after 1970.
var t0 = time.Unix(1_800_000_000, 0)

func hold(t *testing.T, l *Limiter, now time.Time, n int) {
	t.Helper()
	for i := range n {
		if err := l.Acquire(context.Background(), now); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
}

func TestLimiterStartsAtMax(t *testing.T) {
	t.Parallel()
	l := New(Config{Max: 5, Queue: -1})
	hold(t, l, t0, 5)
	if err := l.Acquire(context.Background(), t0); !errors.Is(err, ErrFull) {
		t.Fatalf("sixth attempt: %v, want ErrConcurrencyLimit", err)
	}
	if l.TryAcquire(t0) {
		t.Error("tryAcquire over the limit")
	}
	l.Release(t0, t0, signal.None, 0)
	if !l.TryAcquire(t0) {
		t.Error("tryAcquire refused a free slot")
	}
	if s := l.Snapshot(time.Now()); s.Limit != 5 || s.InFlight != 5 || s.Rejected != 2 {
		t.Errorf("snapshot %+v", s)
	}
}

// TestLimiterCutsOncePerEpisode: an overloaded outcome halves the attempts
// in flight; attempts that started before the cut do not cut again; one
// that started after it does.
func TestLimiterCutsOncePerEpisode(t *testing.T) {
	t.Parallel()
	l := New(Config{Queue: -1})
	hold(t, l, t0, 40)
	cut := t0.Add(time.Second)
	l.Release(t0, cut, signal.Overloaded, 0) // 40 in flight, itself included
	if got := l.current(); got != 20 {
		t.Fatalf("limit %v after the first overload, want 20 (half of 40 in flight)", got)
	}
	for range 10 {
		l.Release(t0, cut.Add(time.Millisecond), signal.Overloaded, 0) // same episode
	}
	if got := l.current(); got != 20 {
		t.Fatalf("limit %v after the same episode's overloads, want 20", got)
	}
	// 29 still in flight, over the limit: nothing new gets in.
	if l.TryAcquire(cut) {
		t.Fatal("admitted over the limit")
	}
	for range 19 {
		l.Release(t0, cut, signal.None, 0)
	}
	hold(t, l, cut.Add(time.Millisecond), 10) // 20 in flight, 10 started after the cut
	l.Release(cut.Add(time.Millisecond), cut.Add(2*time.Second), signal.Overloaded, 0)
	if got := l.current(); got != 10 {
		t.Errorf("limit %v after a new episode, want 10", got)
	}
}

func TestLimiterFloor(t *testing.T) {
	t.Parallel()
	l := New(Config{Min: 3, Max: 100, Queue: -1})
	now := t0
	for range 20 {
		hold(t, l, now, 1)
		l.Release(now, now.Add(time.Millisecond), signal.Overloaded, 0)
		now = now.Add(time.Second)
	}
	if got := l.current(); got != 3 {
		t.Errorf("limit %v, want the floor 3", got)
	}
}

// TestLimiterGrowsWhenUsed: an accept raises the limit by one only while
// at least half of it is in use, and never above Max.
func TestLimiterGrowsWhenUsed(t *testing.T) {
	t.Parallel()
	l := New(Config{Max: 30, Queue: -1})
	hold(t, l, t0, 20)
	l.Release(t0, t0.Add(time.Millisecond), signal.Overloaded, 0) // limit 10, 19 in flight
	later := t0.Add(time.Second)
	for range 14 {
		l.Release(t0, later, signal.None, 0)
	}
	// 5 in flight of a limit of 10: at half, an accept raises it.
	l.Release(t0, later, signal.Accepted, 0)
	if got := l.current(); got != 11 {
		t.Fatalf("limit %v, want 11", got)
	}
	// 4 in flight of 11: below half, an accept leaves it.
	l.Release(t0, later, signal.Accepted, 0)
	if got := l.current(); got != 11 {
		t.Fatalf("limit %v with little in use, want 11", got)
	}
	for range 3 {
		l.Release(t0, later, signal.None, 0)
	}
	// Kept full, the limit doubles in a limit's worth of accepts.
	hold(t, l, later, 11)
	accepts := 0
	for l.current() < 22 {
		l.Release(later, later, signal.Accepted, 0)
		accepts++
		for l.TryAcquire(later) {
		}
	}
	if accepts != 11 {
		t.Errorf("%d accepts from 11 to 22, want 11", accepts)
	}
	for range 100 {
		l.Release(later, later, signal.Accepted, 0)
		for l.TryAcquire(later) {
		}
	}
	if got := l.current(); got != 30 {
		t.Errorf("limit %v, want Max 30", got)
	}
}

// TestLimiterSlowAnswers: an accepted answer that took more than half of
// the attempt's patience, and more than twice the host's fastest, cuts
// like an overload; one within either bound does not.
func TestLimiterSlowAnswers(t *testing.T) {
	t.Parallel()
	l := New(Config{Queue: -1})
	hold(t, l, t0, 10)
	l.Release(t0, t0.Add(600*time.Millisecond), signal.Accepted, time.Second)
	if got := l.current(); got != 1000 {
		t.Fatalf("limit %v after the first answer: nothing to compare it with yet", got)
	}
	l.Release(t0, t0.Add(400*time.Millisecond), signal.Accepted, time.Second)
	l.Release(t0, t0.Add(700*time.Millisecond), signal.Accepted, time.Second)
	if got := l.current(); got != 1000 {
		t.Fatalf("limit %v after 0.7 of the patience but under twice the fastest (0.4)", got)
	}
	l.Release(t0, t0.Add(10*time.Millisecond), signal.Accepted, time.Second)
	l.Release(t0, t0.Add(450*time.Millisecond), signal.Accepted, time.Second)
	if got := l.current(); got != 1000 {
		t.Fatalf("limit %v after 0.45 of the patience", got)
	}
	l.Release(t0, t0.Add(600*time.Millisecond), signal.Accepted, time.Second)
	if got := l.current(); got != 2.5 {
		t.Errorf("limit %v after an answer in 0.6 of its patience, 60 times the fastest: want 2.5 (half of 5 in flight)", got)
	}
}

// TestLimiterQueue: attempts over the limit wait their turn in order,
// leave the queue when their context ends, and are refused when it is
// full.
func TestLimiterQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Max: 1, Queue: 2})
		hold(t, l, time.Now(), 1)

		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				if err := l.Acquire(context.Background(), time.Now()); err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				l.Release(time.Now(), time.Now(), signal.None, 0)
			})
			synctest.Wait() // queued in this order
		}
		if s := l.Snapshot(time.Now()); s.Waiting != 2 {
			t.Fatalf("waiting %d, want 2", s.Waiting)
		}
		if err := l.Acquire(context.Background(), time.Now()); !errors.Is(err, ErrFull) {
			t.Fatalf("with the queue full: %v, want ErrConcurrencyLimit", err)
		}
		l.Release(time.Now(), time.Now(), signal.None, 0)
		wg.Wait()
		if len(order) != 2 || order[0] != 0 || order[1] != 1 {
			t.Errorf("served in order %v, want [0 1]", order)
		}

		// By default the waiting room is as large as the limit.
		l2 := New(Config{Max: 2})
		hold(t, l2, time.Now(), 2)
		for range 2 {
			go l2.Acquire(context.Background(), time.Now())
		}
		synctest.Wait()
		if err := l2.Acquire(context.Background(), time.Now()); !errors.Is(err, ErrFull) {
			t.Errorf("third waiter for a limit of 2: %v, want ErrConcurrencyLimit", err)
		}
		for range 4 {
			l2.Release(time.Now(), time.Now(), signal.None, 0)
		}
		synctest.Wait()

		// A wait bounded by the caller's deadline.
		hold(t, l, time.Now(), 1)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := l.Acquire(ctx, time.Now())
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Errorf("after %v: %v, want the deadline after 3s", time.Since(start), err)
		}
		if s := l.Snapshot(time.Now()); s.Waiting != 0 || s.InFlight != 1 {
			t.Errorf("after the wait ended: %+v", s)
		}
		l.Release(time.Now(), time.Now(), signal.None, 0)
		if !l.AtRest(time.Now()) {
			t.Error("not at rest with nothing in flight or waiting")
		}
	})
}

// TestLimiterForgets: an idle limiter returns to Max once its last cut is
// Forget old, and is at rest from then on.
func TestLimiterForgets(t *testing.T) {
	t.Parallel()
	l := New(Config{Max: 100, Forget: 30 * time.Second, Queue: -1})
	hold(t, l, t0, 10)
	l.Release(t0, t0, signal.Overloaded, 0)
	for range 9 {
		l.Release(t0, t0, signal.None, 0)
	}
	if l.AtRest(t0.Add(time.Second)) {
		t.Fatal("at rest right after a cut")
	}
	later := t0.Add(31 * time.Second)
	if !l.AtRest(later) {
		t.Fatal("not at rest once the cut is forgotten")
	}
	hold(t, l, later, 1)
	if got := l.current(); got != 100 {
		t.Errorf("limit %v after an idle spell, want Max", got)
	}
}

func TestLimiterNil(t *testing.T) {
	t.Parallel()
	var l *Limiter
	if l.Acquire(context.Background(), t0) != nil || !l.TryAcquire(t0) || !l.AtRest(t0) {
		t.Error("a nil limiter must admit everything and be at rest")
	}
	l.Release(t0, t0, signal.Overloaded, 0)
	if l.Snapshot(time.Now()) != (Stats{}) {
		t.Error("nil snapshot")
	}
}

// TestLimiterConcurrent hammers one limiter from many goroutines: never
// more in flight than the limit allows plus what the cuts left over, and
// every slot given back at the end.
func TestLimiterConcurrent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Max: 8, Queue: 16})
		var peak atomic.Int64
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				for i := range 200 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g%5)*time.Millisecond)
					start := time.Now()
					if err := l.Acquire(ctx, start); err != nil {
						cancel()
						continue
					}
					if n := l.inflight.Load(); n > peak.Load() {
						peak.Store(n)
					}
					time.Sleep(time.Millisecond)
					l.Release(start, time.Now(), signal.Signal(i%3), 0)
					cancel()
				}
			})
		}
		wg.Wait()
		if s := l.Snapshot(time.Now()); s.InFlight != 0 || s.Waiting != 0 {
			t.Errorf("left over: %+v", s)
		}
		if p := peak.Load(); p > 8 {
			t.Errorf("peak %d in flight, above Max 8", p)
		}
	})
}

// BenchmarkLimiterAcquire is an attempt's whole cost below the limit:
// Acquire and release. Run with -benchmem: it allocates nothing.
func BenchmarkLimiterAcquire(b *testing.B) {
	l := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.Acquire(ctx, t0); err != nil {
				b.Fatal(err)
			}
			l.Release(t0, t0, signal.Accepted, 0)
		}
	})
}

// TestLimiterAnyTime: the slow-answer rule and the forgetting work for any
// time, before 1970 too.
func TestLimiterAnyTime(t *testing.T) {
	t.Parallel()
	for _, now := range []time.Time{{}, time.Unix(-1, 0), time.Unix(0, 0)} {
		l := New(Config{Queue: -1})
		hold(t, l, now, 4)
		l.Release(now, now.Add(10*time.Millisecond), signal.Accepted, time.Second)
		l.Release(now, now.Add(600*time.Millisecond), signal.Accepted, time.Second)
		if got := l.current(); got != 1.5 {
			t.Errorf("at %v: limit %v after a slow answer, want 1.5", now, got)
		}
		for range 2 {
			l.Release(now, now, signal.None, 0)
		}
		if !l.AtRest(now.Add(time.Minute)) {
			t.Errorf("at %v: not at rest a minute later", now)
		}
	}
}
