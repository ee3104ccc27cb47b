package hoststate

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/internal/breaker"
	"github.com/seedhq/httpretry/internal/limiter"
)

var t0 = time.Unix(1_800_000_000, 0)

// TestAtRestWithHedging: a host's state is at rest, and may be dropped,
// only when its hedge budget is full and its estimator has no recent
// sample.
func TestAtRestWithHedging(t *testing.T) {
	t.Parallel()
	s := &State{}
	assert.True(t, s.AtRest(t0))

	hb := s.HedgeBudget()
	assert.Same(t, hb, s.HedgeBudget(), "attached once")
	require.True(t, hb.Allow(false))
	assert.False(t, s.AtRest(t0), "a hedge budget that is not full")
	for range 25 {
		hb.Request()
	}
	assert.True(t, s.AtRest(t0))

	e := s.Estimator(0.95, 100)
	assert.Same(t, e, s.Estimator(0.5, 1), "attached once, by the first policy")
	assert.True(t, s.AtRest(t0), "an estimator without samples")
	e.Record(time.Millisecond, t0)
	assert.False(t, s.AtRest(t0.Add(time.Minute)), "recent samples")
	assert.True(t, s.AtRest(t0.Add(IdleAfter+time.Second)), "none for ten minutes")
}

// level is a budget that reports a level.
type level struct {
	noLevel
	available, capacity float64
}

func (l *level) Level() (float64, float64) { return l.available, l.capacity }

// noLevel is a budget that reports none.
type noLevel struct{}

func (noLevel) Begin()               {}
func (noLevel) AllowRetry(bool) bool { return true }
func (noLevel) Refund(bool)          {}
func (noLevel) Succeeded(bool, bool) {}

// TestBudgetAtRest: a budget is at rest when it reports a full level,
// whoever implements it; one that reports no level never is, and its state
// goes only once idle for IdleAfter.
func TestBudgetAtRest(t *testing.T) {
	t.Parallel()
	assert.True(t, (&State{Budget: &level{available: 5, capacity: 5}}).AtRest(t0))
	assert.False(t, (&State{Budget: &level{available: 4, capacity: 5}}).AtRest(t0))
	opaque := &State{Budget: noLevel{}}
	opaque.Touch(t0)
	assert.False(t, opaque.AtRest(t0))
	assert.False(t, opaque.Evictable(t0.Add(IdleAfter-time.Second)))
	assert.True(t, opaque.Evictable(t0.Add(IdleAfter)), "idle long enough that what it learnt is stale")
}

// TestEvictableKeepsProtection: state that protects its host is not
// evictable while the protection holds: a breaker open for longer than
// IdleAfter, a call using it, attempts in flight.
func TestEvictableKeepsProtection(t *testing.T) {
	t.Parallel()
	b := breaker.New("h", breaker.Config{ConsecutiveFailures: 1, Window: time.Second, OpenFor: time.Hour})
	done, err := b.Allow()
	require.NoError(t, err)
	done(breaker.Failure)
	s := &State{Breaker: b}
	s.Touch(t0)
	assert.False(t, s.Evictable(t0.Add(IdleAfter)), "open for an hour")
	assert.True(t, s.Evictable(t0.Add(time.Hour)), "idle as long as it stays open")

	l := limiter.New(limiter.Config{Max: 2})
	busy := &State{Limiter: l}
	busy.Touch(t0)
	require.NoError(t, l.Acquire(t.Context(), t0))
	assert.False(t, busy.Evictable(t0.Add(24*time.Hour)), "an attempt in flight")

	used := &State{}
	used.Touch(t0)
	used.Use()
	assert.False(t, used.Evictable(t0.Add(24*time.Hour)), "a call uses it")
	used.Done()
	assert.True(t, used.Evictable(t0.Add(SweepEvery)))
}

// TestTableBound: past its limit, the table drops evictable state to make
// room, keeps state that protects its host, and then gives a new host no
// state, counting it; Empty state is never kept.
func TestTableBound(t *testing.T) {
	t.Parallel()
	var tab Table[string]
	tab.Limit = 2
	protecting := func() *State { return &State{Budget: &level{available: 1, capacity: 5}} }
	resting := func() *State { return &State{Budget: &level{available: 5, capacity: 5}} }
	require.Nil(t, tab.Create("empty", t0, func() *State { return &State{} }), "empty state is not kept")
	require.NotNil(t, created(&tab, "a", t0, protecting))
	require.NotNil(t, created(&tab, "b", t0, resting))
	later := t0.Add(2 * SweepEvery)
	assert.NotNil(t, created(&tab, "c", later, protecting), "b was at rest: dropped for c")
	assert.Nil(t, tab.Load("b"))
	assert.Nil(t, created(&tab, "d", later, protecting), "a and c protect their hosts")
	assert.EqualValues(t, 1, tab.Refused())
	assert.NotNil(t, tab.Load("a"))
	assert.Equal(t, 2, tab.Len())
}

// TestTableSweepIsBounded: one sweep step looks at a bounded number of
// entries, however large the table.
func TestTableSweepIsBounded(t *testing.T) {
	t.Parallel()
	var tab Table[int]
	for i := range 1000 {
		created(&tab, i, t0, func() *State { return &State{Budget: &level{available: 5, capacity: 5}} })
	}
	created(&tab, -1, t0.Add(2*SweepEvery), func() *State { return &State{Budget: &level{available: 5, capacity: 5}} })
	assert.Equal(t, 1001-evictScan, tab.Len(), "one creation dropped evictScan entries, no more")
}

// created is Create for a call that ends at once: the state is not left
// counted as in use.
func created[K comparable](tab *Table[K], k K, now time.Time, make func() *State) *State {
	s := tab.Create(k, now, make)
	if s != nil {
		s.Done()
	}
	return s
}

// TestUseNeverReturnsDroppedState: calls look a host's state up and count
// themselves in while sweeps drop every entry that is evictable (each
// state made long unused, at rest). Whatever the interleaving, a state
// Use or Create returns is the table's entry for its key for as long as
// it is in use: never one a sweep dropped between the lookup and the count
// (which left a call updating a breaker and budget no other call sees).
func TestUseNeverReturnsDroppedState(t *testing.T) {
	t.Parallel()
	var tab Table[int]
	resting := func() *State { return &State{Budget: &level{available: 5, capacity: 5}} }
	old := time.Now().Add(-2 * IdleAfter) // evictable at once
	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Add(1)
	go func() { // creations of other hosts sweep the oldest entries
		defer sweeps.Done()
		for i := 1000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			created(&tab, i, time.Now(), resting)
		}
	}()
	var bad atomic.Int64
	var users sync.WaitGroup
	for g := range 4 {
		users.Add(1)
		go func() {
			defer users.Done()
			for i := range 20_000 {
				k := (g*20_000 + i) % 16
				s := tab.Use(k)
				if s == nil {
					s = tab.Create(k, old, resting)
				}
				if s == nil {
					continue
				}
				s.Touch(old) // still evictable, but for the count
				for range 3 {
					if v, ok := tab.m.Load(k); !ok || v.(*State) != s {
						bad.Add(1)
					}
				}
				s.Done()
			}
		}()
	}
	users.Wait()
	close(stop)
	sweeps.Wait()
	assert.Zero(t, bad.Load(), "a state in use was not the table's entry for its key")
}

// hookLevel is a full budget that runs during once, the first time the
// sweep asks its level: a whole call between Evictable's look and the
// entry's removal.
type hookLevel struct {
	level
	during func()
}

func (l *hookLevel) Level() (float64, float64) {
	a, c := l.available, l.capacity // what the sweep sees: full
	if f := l.during; f != nil {
		l.during = nil
		f()
	}
	return a, c
}

// TestSweepKeepsStateACallUsedInsideItsWindow: a call counts itself in,
// spends retries, touches the state and ends, all after the sweep found
// the state evictable and before it dropped it. → The state the call
// changed stays the host's.
func TestSweepKeepsStateACallUsedInsideItsWindow(t *testing.T) {
	t.Parallel()
	var tab Table[string]
	now := time.Now()
	b := &hookLevel{level: level{available: 5, capacity: 5}}
	require.NotNil(t, created(&tab, "h", now.Add(-2*SweepEvery), func() *State { return &State{Budget: b} }))
	var used *State
	b.during = func() {
		used = tab.Use("h")
		require.NotNil(t, used)
		b.available = 1 // spent retries
		used.Touch(now)
		used.Done()
	}
	tab.mu.Lock()
	tab.sweepLocked(now)
	tab.mu.Unlock()
	assert.Same(t, used, tab.Load("h"), "the state the call used and changed is still the host's")
	assert.Equal(t, 1, tab.Len())
}
