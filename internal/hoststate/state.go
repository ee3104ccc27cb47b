// Package hoststate keeps what a Transport learns about each host: the
// mechanisms that protect it (retry budget, breaker, overload controls,
// hedge budget, latency estimate) and its statistics, in a table that is
// bounded, lock-free to read, and never drops the state of a host it still
// protects to make room for others.
package hoststate

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry/internal/breaker"
	"github.com/seedhq/httpretry/internal/hedgebudget"
	"github.com/seedhq/httpretry/internal/latency"
	"github.com/seedhq/httpretry/internal/limiter"
	"github.com/seedhq/httpretry/internal/pacer"
	"github.com/seedhq/httpretry/internal/throttle"
)

// Budget is a retry budget, as the root package's Budget interface.
type Budget interface {
	Begin()
	AllowRetry(timeout bool) bool
	Refund(timeout bool)
	Succeeded(retried, timeout bool)
}

// State is what a Transport keeps for one host. The mechanisms are set
// when the state is made and never change; a nil one is off.
type State struct {
	Key     string // "host:port", as Attempt.Host
	Budget  Budget
	Breaker *breaker.Breaker

	Throttle *throttle.Throttle
	Limiter  *limiter.Limiter
	Pacer    *pacer.Pacer

	// Hedging's state, attached by the first request whose policy needs
	// it (the policies that reach a host may differ by path): the
	// latency of its first attempts, nil until a request with adaptive
	// hedging, and the hedge budget, nil until a hedge or such a request.
	latency atomic.Pointer[latency.Estimator]
	hedges  atomic.Pointer[hedgebudget.Budget]

	calls    atomic.Int64 // calls using the state now
	lastUsed atomic.Int64 // Unix nanoseconds

	// Statistics, for Stats.
	Attempts        atomic.Int64
	Retries         atomic.Int64
	LastClass       atomic.Int32 // the class of the last failure
	LastFailure     atomic.Int64 // Unix nanoseconds of the last failure, 0 if none
	BudgetRefusals  atomic.Int64 // retries the budget refused
	HedgeRefusals   atomic.Int64 // hedges the hedge budget refused
	BreakerRefusals atomic.Int64 // attempts not sent because the breaker was open

	// ResumesRefusedUntil is when, in Unix nanoseconds, the host may be
	// sent a resume again after it refused one 401 or 403; 0 if it never
	// did.
	ResumesRefusedUntil atomic.Int64
}

// Empty reports whether s has no mechanism at all: such state protects
// nothing and is not worth keeping.
func (s *State) Empty() bool {
	return s.Budget == nil && s.Breaker == nil && s.Throttle == nil && s.Limiter == nil && s.Pacer == nil &&
		s.latency.Load() == nil && s.hedges.Load() == nil
}

// dropped is the count of calls of a state the table's sweep has claimed
// to drop: no call counts itself in any more.
const dropped = math.MinInt64 / 2

// Use notes that a call uses s, until Done, so that the table keeps it.
// It reports false, counting nothing, when a sweep has claimed s to drop
// it: s is then no longer (or is about to stop being) the host's state.
func (s *State) Use() bool {
	for {
		n := s.calls.Load()
		if n < 0 {
			return false
		}
		if s.calls.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// claim marks s, which no call uses, as being dropped, so that no call
// counts itself in; it reports false if a call uses s.
func (s *State) claim() bool { return s.calls.CompareAndSwap(0, dropped) }

// unclaim gives a claimed s back to calls.
func (s *State) unclaim() { s.calls.Store(0) }

// Done ends a call's Use.
func (s *State) Done() { s.calls.Add(-1) }

// Touch notes that s was used at now.
func (s *State) Touch(now time.Time) { s.lastUsed.Store(now.UnixNano()) }

// LastUsed is when s was last used.
func (s *State) LastUsed() time.Time { return time.Unix(0, s.lastUsed.Load()) }

// Failed records a failed attempt of class c at now.
func (s *State) Failed(c int32, now time.Time) {
	s.LastClass.Store(c)
	s.LastFailure.Store(now.UnixNano())
}

// Estimator returns the host's latency estimator, attaching one for
// quantile q and minSamples if it has none: the first policy to reach the
// host sets them.
func (s *State) Estimator(q float64, minSamples int) *latency.Estimator {
	if e := s.latency.Load(); e != nil {
		return e
	}
	s.latency.CompareAndSwap(nil, latency.New(q, minSamples, IdleAfter))
	return s.latency.Load()
}

// Latency returns the host's latency estimator, nil if it has none.
func (s *State) Latency() *latency.Estimator { return s.latency.Load() }

// HedgeBudget returns the host's hedge budget, attaching one if it has
// none.
func (s *State) HedgeBudget() *hedgebudget.Budget {
	if b := s.hedges.Load(); b != nil {
		return b
	}
	s.hedges.CompareAndSwap(nil, hedgebudget.New(hedgebudget.Ratio, hedgebudget.Burst, hedgebudget.Keep))
	return s.hedges.Load()
}

// Hedges returns the host's hedge budget, nil if it has none.
func (s *State) Hedges() *hedgebudget.Budget { return s.hedges.Load() }

// AtRest reports whether s behaves as new state would, so that dropping
// it changes nothing. A budget is at rest when it reports a level
// (Level() (available, capacity float64)) and is full; a budget that
// reports none is dropped only when the state has been idle long enough.
func (s *State) AtRest(now time.Time) bool {
	if s.Budget != nil && !budgetFull(s.Budget) {
		return false
	}
	if l := s.latency.Load(); l != nil && !l.AtRest(now) {
		return false
	}
	if h := s.hedges.Load(); h != nil && !h.AtRest() {
		return false
	}
	return s.Breaker.AtRest() && s.Throttle.AtRest(now) && s.Limiter.AtRest(now) && s.Pacer.AtRest(now)
}

func budgetFull(b Budget) bool {
	l, ok := b.(interface {
		Level() (available, capacity float64)
	})
	if !ok {
		return false
	}
	available, capacity := l.Level()
	return available >= capacity
}

// Evictable reports whether dropping s at now loses nothing that protects
// the host: no call uses it, nothing is in flight or waiting, and it is at
// rest and unused for SweepEvery, or unused for IdleAfter and for as long as
// its breaker stays open.
func (s *State) Evictable(now time.Time) bool {
	return s.calls.Load() == 0 && s.unneeded(now)
}

// unneeded is Evictable but for the calls that use s.
func (s *State) unneeded(now time.Time) bool {
	if s.Limiter.Busy() || s.Pacer.Busy() {
		return false
	}
	unused := now.Sub(s.LastUsed())
	return unused >= SweepEvery && s.AtRest(now) ||
		unused >= max(IdleAfter, s.Breaker.OpenFor())
}

// Stale reports whether s is at rest and has gone unused for SweepEvery:
// it behaves as new state would, and is dropped when the table's sweep
// reaches it. Stats no longer lists it.
func (s *State) Stale(now time.Time) bool {
	return s.calls.Load() == 0 && now.Sub(s.LastUsed()) >= SweepEvery && s.AtRest(now)
}
