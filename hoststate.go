package httpretry

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on per-host state. A host gets state at its first failure or its
// first hedge (or, with adaptive hedging or an overload control, which
// learn from every request, at its first request); a host that has only
// succeeded holds none, since a full budget and a closed breaker with no
// failures behave exactly like new
// ones.
const (
	// maxHosts bounds the hosts with state. Past it, entries at rest go
	// first, then the least recently used.
	maxHosts = 10_000
	// idleAfter is how long an entry may go unused before it is dropped
	// whatever its state: by then what it learnt is stale.
	idleAfter = 10 * time.Minute
	// sweepEvery is how often entries at rest are looked for.
	sweepEvery = time.Minute
)

// hostState is what the Transport keeps for one host.
type hostState struct {
	key     string // "host:port", as Attempt.Host
	budget  Budget
	breaker *breaker

	// The overload controls, each nil when its policy is off.
	throttle *throttle
	limiter  *limiter
	pacer    *pacer

	// Hedging's state, attached by the first request whose policy needs
	// it (the policies that reach a host may differ by path): the
	// latency of its first attempts, nil until a request with adaptive
	// hedging, and the hedge budget, nil until a hedge or such a request.
	latency atomic.Pointer[latencyEstimator]
	hedges  atomic.Pointer[hedgeBudget]

	lastUsed    atomic.Int64 // Unix nanoseconds
	attempts    atomic.Int64
	retries     atomic.Int64
	lastClass   atomic.Int32 // Class of the last failure
	lastFailure atomic.Int64 // Unix nanoseconds of the last failure, 0 if none

	budgetRefusals  atomic.Int64 // retries the budget refused
	hedgeRefusals   atomic.Int64 // hedges the hedge budget refused
	breakerRefusals atomic.Int64 // attempts not sent because the breaker was open
}

// atRest reports whether the state behaves as new state would, so that
// dropping it changes nothing.
func (s *hostState) atRest(now time.Time) bool {
	switch b := s.budget.(type) {
	case nil:
	case *TokenBucket:
		if !b.full() {
			return false
		}
	case *RatioBudget:
		if !b.idle(now) {
			return false
		}
	default:
		return false // a budget of the caller's: only idleness drops it
	}
	if l := s.latency.Load(); l != nil && !l.atRest(now) {
		return false
	}
	if h := s.hedges.Load(); h != nil && !h.atRest() {
		return false
	}
	return (s.breaker == nil || s.breaker.atRest()) &&
		s.throttle.atRest(now) && s.limiter.atRest(now) && s.pacer.atRest(now)
}

// estimator returns the host's latency estimator, attaching one for
// policy a if it has none.
func (s *hostState) estimator(a *adaptiveHedge) *latencyEstimator {
	if e := s.latency.Load(); e != nil {
		return e
	}
	s.latency.CompareAndSwap(nil, newLatencyEstimator(a.q, a.minSamples, idleAfter))
	return s.latency.Load()
}

// hedgeBudget returns the host's hedge budget, attaching one if it has
// none.
func (s *hostState) hedgeBudget() *hedgeBudget {
	if b := s.hedges.Load(); b != nil {
		return b
	}
	s.hedges.CompareAndSwap(nil, newHedgeBudget(hedgeRatio, hedgeBurst, hedgeKeep))
	return s.hedges.Load()
}

func (s *hostState) touch(now time.Time) { s.lastUsed.Store(now.UnixNano()) }

// failed records a failed attempt of class c.
func (s *hostState) failed(c Class, now time.Time) {
	s.lastClass.Store(int32(c))
	s.lastFailure.Store(now.UnixNano())
}

// hostStates is the table of per-host state, keyed by hostPort. Lookups
// are lock-free and allocation-free; it is swept on the way, without a
// goroutine of its own.
type hostStates struct {
	m         sync.Map // hostPort → *hostState
	n         atomic.Int64
	lastSweep atomic.Int64
	sweeping  sync.Mutex
}

// load returns the state of h, or nil.
func (t *hostStates) load(h hostPort) *hostState {
	if t.n.Load() == 0 {
		return nil
	}
	if v, ok := t.m.Load(h); ok {
		return v.(*hostState)
	}
	return nil
}

// create returns the state of h, creating it under policy p.
func (t *hostStates) create(h hostPort, p *policy, now time.Time) *hostState {
	if v, ok := t.m.Load(h); ok {
		return v.(*hostState)
	}
	key := h.String()
	s := &hostState{key: key, budget: p.budgetFor(key)}
	if p.breaker != nil {
		s.breaker = newBreaker(key, p.breaker)
	}
	if o := p.overload; o != nil {
		if o.Throttle {
			s.throttle = newThrottle(throttleConfig{K: o.ThrottleK, Window: o.ThrottleWindow})
		}
		if o.Limit {
			s.limiter = newLimiter(limiterConfig{Max: o.LimitMax, Min: o.LimitMin, Queue: o.LimitQueue})
		}
		if o.Pace {
			s.pacer = newPacer()
		}
	}
	s.touch(now)
	v, loaded := t.m.LoadOrStore(h, s)
	if !loaded {
		t.n.Add(1)
		t.maybeSweep(now)
	}
	return v.(*hostState)
}

// maybeSweep drops entries at rest or idle once a sweepEvery, and the
// least recently used when the table is over maxHosts.
func (t *hostStates) maybeSweep(now time.Time) {
	over := t.n.Load() > maxHosts
	if !over && now.UnixNano()-t.lastSweep.Load() < int64(sweepEvery) {
		return
	}
	if !t.sweeping.TryLock() {
		return
	}
	defer t.sweeping.Unlock()
	t.lastSweep.Store(now.UnixNano())
	rest := now.Add(-sweepEvery).UnixNano()
	idle := now.Add(-idleAfter).UnixNano()
	type entry struct {
		k    any
		s    *hostState
		used int64
	}
	var live []entry
	t.m.Range(func(k, v any) bool {
		s := v.(*hostState)
		used := s.lastUsed.Load()
		if used < idle || (used < rest && s.atRest(now)) {
			t.drop(k, s)
		} else if over {
			live = append(live, entry{k, s, used})
		}
		return true
	})
	if excess := int(t.n.Load()) - maxHosts*9/10; over && excess > 0 {
		// Keep the most recently used nine tenths.
		slices.SortFunc(live, func(a, b entry) int { return cmp.Compare(a.used, b.used) })
		for _, e := range live[:min(excess, len(live))] {
			t.drop(e.k, e.s)
		}
	}
}

func (t *hostStates) drop(k any, s *hostState) {
	if t.m.CompareAndDelete(k, s) {
		t.n.Add(-1)
	}
}
