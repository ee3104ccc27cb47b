package hoststate

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on per-host state. A host gets state at its first failure or its
// first hedge (or, with adaptive hedging or an overload control, which
// learn from every request, at its first request); a host that has only
// succeeded holds none, since a full budget and a closed breaker with no
// failures behave exactly like new ones.
//
// State that protects its host (a budget that is not full, a breaker that
// is not closed or has counted failures, a pause announced by the host,
// attempts in flight) is never dropped to make room for other hosts: a
// process that calls hosts chosen by others (a webhook sender, a crawler)
// could otherwise be fed failing hosts until the open breaker of a real
// one is forgotten. Only state at rest, which behaves as new state would,
// or state idle long enough that what it learnt is stale, is dropped. Past
// MaxHosts entries of state that must be kept, a new host goes without
// state (it is treated as a host with fresh state is: a full budget, a
// closed breaker), and the table counts it.
const (
	// MaxHosts bounds the hosts with state.
	MaxHosts = 10_000
	// IdleAfter is how long an entry may go unused before it may be dropped
	// whatever it holds (a breaker's open time permitting): by then what it
	// learnt is stale.
	IdleAfter = 10 * time.Minute
	// SweepEvery is how long an entry at rest is kept unused.
	SweepEvery = time.Minute
	// evictScan is how many entries one sweep step looks at: the cost of
	// making room for a new host, whatever the size of the table.
	evictScan = 8
)

// Table is the table of per-host state, keyed by K. Lookups are lock-free
// and allocation-free. Entries are created one at a time, and each
// creation, and at most one lookup a second, sweeps a few of the oldest
// entries: making room costs O(1) whatever the table's size. The zero
// value is an empty table bounded at MaxHosts.
type Table[K comparable] struct {
	Limit     int      // the bound on entries; 0 means MaxHosts
	m         sync.Map // K → *State
	n         atomic.Int64
	refused   atomic.Int64 // hosts that went without state
	lastSweep atomic.Int64

	mu    sync.Mutex
	order []K // every key of m once, oldest first from head (guarded by mu)
	head  int
}

// Load returns the state of k, or nil.
func (t *Table[K]) Load(k K) *State {
	if t.n.Load() == 0 {
		return nil
	}
	v, ok := t.m.Load(k)
	if now := time.Now(); now.UnixNano()-t.lastSweep.Load() >= int64(time.Second) {
		t.sweep(now)
	}
	if ok {
		return v.(*State)
	}
	return nil
}

// Use returns the state of k counted as in use (see State.Use), or nil;
// the caller ends its use with Done. A state in use is never dropped, and
// Use never returns one that was: a sweep claims a state before it drops
// it, a claimed state counts no call in, and k is looked up again.
func (t *Table[K]) Use(k K) *State {
	for {
		s := t.Load(k)
		if s == nil {
			return nil
		}
		if s.Use() {
			return s
		}
		runtime.Gosched() // a sweep is dropping s, or deciding to keep it
	}
}

// Create returns the state of k, made by make at now if k has none,
// counted as in use as Use does, or nil when the table holds Limit entries
// that must all be kept, or when make returns state that is Empty (which
// is then not kept). States are made one at a time.
func (t *Table[K]) Create(k K, now time.Time, make func() *State) *State {
	if s := t.Use(k); s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m.Load(k); ok { // no sweep runs while mu is held
		s := v.(*State)
		s.Use() // no sweep has claimed s: it holds mu to claim
		return s
	}
	t.sweepLocked(now)
	if t.n.Load() >= int64(cmp.Or(t.Limit, MaxHosts)) {
		t.refused.Add(1)
		return nil
	}
	s := make()
	if s.Empty() {
		return nil
	}
	s.Touch(now)
	s.Use()
	t.m.Store(k, s)
	t.n.Add(1)
	t.order = append(t.order, k)
	return s
}

// Len is how many hosts have state.
func (t *Table[K]) Len() int { return int(t.n.Load()) }

// Refused is how many times a host went without state because the table
// was full of state that must be kept.
func (t *Table[K]) Refused() int64 { return t.refused.Load() }

// Range calls f for every state, as sync.Map's Range does.
func (t *Table[K]) Range(f func(*State) bool) {
	t.m.Range(func(_, v any) bool { return f(v.(*State)) })
}

// sweep runs a sweep step at now, unless one ran less than a second ago or
// is running.
func (t *Table[K]) sweep(now time.Time) {
	last := t.lastSweep.Load()
	if now.UnixNano()-last < int64(time.Second) || !t.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	t.sweepLocked(now)
}

// sweepLocked looks at the evictScan oldest entries and drops those that
// are evictable; the others go to the back, second-chance style.
func (t *Table[K]) sweepLocked(now time.Time) {
	t.lastSweep.Store(now.UnixNano())
	var zero K
	for range min(evictScan, len(t.order)-t.head) {
		k := t.order[t.head]
		t.order[t.head] = zero
		t.head++
		v, ok := t.m.Load(k)
		if !ok {
			continue
		}
		if s := v.(*State); s.Evictable(now) && s.claim() {
			if s.unneeded(now) {
				t.m.CompareAndDelete(k, s)
				t.n.Add(-1)
				continue
			}
			// A call used the state and touched it after Evictable
			// looked: it is kept, never out of the table meanwhile.
			s.unclaim()
		}
		t.order = append(t.order, k)
	}
	if t.head > len(t.order)/2 && t.head > evictScan {
		t.order = slices.Delete(t.order, 0, t.head) // amortised: each entry moves once per half of the table
		t.head = 0
	}
}
