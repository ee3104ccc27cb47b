package httpretrytest

import (
	"cmp"
	"sync"
	"time"

	"github.com/seedhq/httpretry"
)

// Fleet is an httpretry.Fleet in memory: Transports that share one stand
// for the processes of a fleet, in a test, without a store. It keeps the
// contract exactly, with no lease and no delay: a cool-down or an open
// breaker one Transport holds holds the others at once; the first Held
// after an open breaker's time gets the trial, and the others are held
// until its outcome is recorded (or OpenFor passes again, when the next
// Held gets another trial); the quota is one
// GCRA schedule. SetDown makes it answer as a fleet whose store is
// unreachable does. The zero value is an empty fleet; it is safe for
// concurrent use.
type Fleet struct {
	mu   sync.Mutex
	keys map[string]*fleetKey
	down bool
}

type fleetKey struct {
	cooling, open time.Time
	openFor       time.Duration // how long the breaker opens for, again after a failed trial
	trial         bool          // the trial of the open breaker is out
	consecutive   int
	tat           time.Time // the quota's theoretical arrival time
}

var _ httpretry.Fleet = (*Fleet)(nil)

// SetDown makes f answer as a fleet whose store is down (down true) or
// back (false): while it is down, it knows nothing and keeps nothing.
func (f *Fleet) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *Fleet) key(k string) *fleetKey {
	if f.keys == nil {
		f.keys = make(map[string]*fleetKey)
	}
	e := f.keys[k]
	if e == nil {
		e = &fleetKey{}
		f.keys[k] = e
	}
	return e
}

// Held returns the cool-down and the open breaker of key at now.
func (f *Fleet) Held(key string, now time.Time) (cooling, open time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return time.Time{}, time.Time{}
	}
	e := f.key(key)
	if !e.open.IsZero() && !now.Before(e.open) {
		// This caller takes the trial (again, if the last one's taker never
		// told its outcome); the others wait for it for OpenFor.
		e.trial, e.open = true, now.Add(e.openFor)
		return e.cooling, time.Time{}
	}
	return e.cooling, e.open
}

// Hold holds key's attempts until until: a cool-down, or an open breaker.
func (f *Fleet) Hold(key string, until time.Time, open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return
	}
	e := f.key(key)
	switch {
	case !open:
		e.cooling = later(e.cooling, until)
	case e.open.IsZero() || until.After(e.open) || e.trial:
		e.openFor = max(time.Until(until), time.Millisecond)
		e.open, e.trial = until, false
	}
}

// Record counts an outcome at key: a failure lengthens the run, a success
// ends it and closes an open breaker whose trial it was.
func (f *Fleet) Record(key string, failed bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0
	}
	e := f.key(key)
	if !failed {
		e.consecutive = 0
		if e.trial {
			e.open, e.trial = time.Time{}, false
		}
		return 0
	}
	e.consecutive++
	return e.consecutive
}

// Take takes a turn at key's quota q at now, at most within away: one GCRA
// schedule for every Transport of the fleet.
func (f *Fleet) Take(key string, q httpretry.Quota, now time.Time, within time.Duration) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down || q.Limit <= 0 {
		return 0, false
	}
	e := f.key(key)
	interval := cmp.Or(q.Per, time.Second) / time.Duration(q.Limit)
	tolerance := time.Duration(max(q.Burst, 1)-1) * interval
	t := later(e.tat, now)
	wait := max(t.Sub(now)-tolerance, 0)
	if wait <= within {
		e.tat = t.Add(interval)
	}
	return wait, true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
