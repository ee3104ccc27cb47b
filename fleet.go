package httpretry

import (
	"fmt"
	"time"

	"github.com/seedhq/httpretry/internal/breaker"
	"github.com/seedhq/httpretry/internal/hoststate"
)

// A Fleet shares what the processes of a fleet learn about the hosts they
// call, so that a limit that belongs to an account rather than a process
// is kept by all of them: a cool-down one process was told (a 429's
// Retry-After, a RateLimit field with nothing left), a quota the policy
// declares (OverloadPolicy.Quota), and a breaker that one process opened
// or that the fleet's failures together opened. Transport.Fleet plugs one
// in; module github.com/seedhq/httpretry/fleet implements it on Redis.
//
// The fleet shares what a host's policy turns on: cool-downs for a host
// that paces (OverloadPolicy.Pace or Quota), the quota for a host that
// declares one, the breaker for a host that has one (Policy.Breaker). A
// key is the host's "host:port", as Attempt.Host, or the Quota.Key its
// policy names, so that one account's several host names share one.
//
// Its methods run on the attempt's path, on the caller's goroutine: each
// must answer at once, from memory or within a small bound of its own, be
// safe for concurrent use, and never fail the call. When it cannot tell
// (its store is down, slow, or has never heard of key), it answers as a
// fleet that knows nothing does (zero times, ok false), and the Transport
// goes on with its own state: each process's pacing and breakers work as
// without a fleet. Times are the caller's clock. A Fleet that is also an
// expvar.Var reports its own state there, and statuspage.Handler shows it.
type Fleet interface {
	// Held returns, at now, until when the fleet holds key's new
	// attempts: cooling, a cool-down (they wait for it, or fail with
	// ErrRateLimited under PaceFailFast), and open, an open breaker
	// (they fail with ErrCircuitOpen). A zero time, or one before now,
	// holds nothing. Once an open breaker's time is over, one process of
	// the fleet is told nothing holds, to send the breaker's trial; the
	// others stay held until that trial's outcome is recorded.
	Held(key string, now time.Time) (cooling, open time.Time)

	// Hold tells the fleet that key's new attempts are to be held until
	// until: a cool-down this process was told (open false), or an open
	// breaker (open true), which this process's breaker opened or the
	// fleet's failures did (see Record).
	Hold(key string, until time.Time, open bool)

	// Record tells the fleet of the outcome of an attempt at key that
	// the breaker counts: failed, or a success, which ends the fleet's
	// run of failures, and an open breaker's trial. It returns the
	// failures in a row the fleet has seen at key, this one included;
	// the Transport opens the breaker in the fleet (Hold) once they reach
	// BreakerPolicy.ConsecutiveFailures, so that many processes that each
	// see a few failures open it together.
	Record(key string, failed bool) (consecutive int)

	// Take takes a turn at key's quota q, declared by the policy, for an
	// attempt at now, at most within away: it returns how long the
	// attempt waits for it. When the next turn is further than within, it
	// takes none and returns how far it is (the attempt is refused). ok
	// false means the fleet cannot share the quota now: the process then
	// paces by the declared rate alone.
	Take(key string, q Quota, now time.Time, within time.Duration) (wait time.Duration, ok bool)
}

// fleetBreaker reports whether the call's host shares its breaker with
// the fleet.
func (c *callState) fleetBreaker() bool {
	return c.t.Fleet != nil && c.statePolicy().breaker != nil
}

// fleetPacing reports whether the call's host shares its cool-downs, and
// a declared quota, with the fleet.
func (c *callState) fleetPacing() bool {
	if c.t.Fleet == nil {
		return false
	}
	o := c.statePolicy().overload
	return o != nil && (o.Pace || o.Quota.Limit > 0)
}

// fleetKey returns the key of the call's host in the fleet: its quota's
// Key, else its "host:port".
func (c *callState) fleetKey() string {
	if o := c.statePolicy().overload; o != nil && o.Quota.Key != "" {
		return o.Quota.Key
	}
	if c.fo != nil && c.fo.host != "" {
		return c.fo.host
	}
	if c.host != "" {
		return c.host
	}
	return c.h.String()
}

// admitFleet runs the fleet's part of stage 1 for attempt a at now: a
// breaker open in the fleet refuses at once; a cool-down is noted on a
// for stage 3 to wait for.
func (c *callState) admitFleet(a *attempt, now time.Time) error {
	brk, pace := c.fleetBreaker(), c.fleetPacing()
	if !brk && !pace {
		return nil
	}
	a.fleetKey = c.fleetKey()
	cooling, open := c.t.Fleet.Held(a.fleetKey, now)
	if brk && open.After(now) {
		if s := c.state; s != nil {
			s.BreakerRefusals.Add(1)
		}
		return &refusal{StopBreaker, fmt.Errorf("%w for %s (open in the fleet, for %v more)", ErrCircuitOpen, c.h, open.Sub(now).Round(time.Millisecond))}
	}
	if pace && cooling.After(now) {
		a.cooling = cooling
	}
	return nil
}

// recordFleet tells the fleet what attempt a, settled with outcome at
// now, says of its host: a cool-down its answer started (hold), and, for
// a host whose breaker the fleet shares, the outcome, opening the breaker
// in the fleet when this process's opened or the fleet's failures in a
// row reached the policy's.
func (c *callState) recordFleet(a *attempt, s *hoststate.State, outcome breaker.Outcome, hold time.Time, now time.Time) {
	f := c.t.Fleet
	key := a.fleetKey
	if key == "" {
		key = c.fleetKey()
	}
	if !hold.IsZero() && c.fleetPacing() {
		f.Hold(key, hold, false)
	}
	if outcome == breaker.Excluded || !c.fleetBreaker() {
		return
	}
	failed := outcome == breaker.Failure
	n := f.Record(key, failed)
	if !failed || s == nil || s.Breaker == nil {
		return
	}
	if cf := c.statePolicy().breaker.ConsecutiveFailures; s.Breaker.IsOpen() || cf > 0 && n >= cf {
		f.Hold(key, now.Add(s.Breaker.OpenFor()), true)
	}
}
