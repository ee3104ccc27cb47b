package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Each process keeps a view of what the fleet holds, per host key, in
// memory: Held answers from it without a round trip. The view is fed by
// the process's own Holds, by the messages the others publish on the
// namespace's channel, and by a sync with Redis after every
// (re)subscription, so that a message missed while the subscription was
// down is made up for.

// entry is what a process knows of one host key.
type entry struct {
	mu         sync.Mutex
	cooling    time.Time     // the fleet's cool-down ends
	open       time.Time     // the fleet's open breaker ends
	openAt     time.Time     // when open was last set here, against a sync older than it
	openFor    time.Duration // how long the breaker opened for
	trial      bool          // this process holds the open breaker's trial, until trialUntil
	trialUntil time.Time
	claiming   bool         // a claim of the trial is under way
	failures   int          // the fleet's failures in a row, as last heard
	failedAt   time.Time    // when failures was last heard; Redis forgets the run failureWindow after
	touched    atomic.Int64 // UnixNano when entry last returned it: a caller may hold it

	// A Hold that could not reach Redis, to be shared once it is back.
	pendingCool, pendingOpen bool

	quota quotaShare
}

// failureWindow is how long the fleet's run of failures at a host lasts
// after its last failure: a run that no failure lengthened for a minute
// starts again from zero.
const failureWindow = time.Minute

// entry returns key's entry, making it when create is set and there is
// room (maxKeys, after the keys at rest are forgotten); nil otherwise. A
// caller that creates is about to write the entry: it is marked used at
// now, so that a sweep does not forget it under the caller. One that
// only looks loses nothing if it reads an entry at rest that a sweep
// forgot, and pays nothing for the mark.
func (f *Fleet) entry(key string, create bool, now time.Time) *entry {
	f.mu.RLock()
	e := f.keys[key]
	f.mu.RUnlock()
	if e == nil && create {
		f.mu.Lock()
		if e = f.keys[key]; e == nil {
			if len(f.keys) >= maxKeys {
				f.sweep(now)
			}
			if len(f.keys) < maxKeys {
				e = &entry{}
				f.keys[key] = e
			}
		}
		f.mu.Unlock()
	}
	if e != nil && create {
		e.use(now)
	}
	return e
}

// use marks e used at now, at most once every 100 ms: a hot key's calls
// do not all write the same word.
func (e *entry) use(now time.Time) {
	if n := now.UnixNano(); n-e.touched.Load() >= int64(100*time.Millisecond) {
		e.touched.Store(n)
	}
}

// sweep forgets, at now, the keys at rest, to make room for new ones; f.mu
// is held for writing. It scans at most once a second, so that a table
// full of keys in use costs a scan a second, not one per new key. An
// entry in use is kept: its lock held, or returned by entry in the last
// second (its caller may not have locked it yet; see entry). What it forgot is in
// Redis still, and comes back with the next message, sync or report
// about the key.
func (f *Fleet) sweep(now time.Time) {
	if !f.swept.IsZero() && now.Sub(f.swept) < time.Second {
		return
	}
	f.swept = now
	for key, e := range f.keys {
		if now.UnixNano()-e.touched.Load() < int64(time.Second) || !e.mu.TryLock() {
			continue
		}
		if e.atRest(now, f.reportLife()) {
			delete(f.keys, key)
		}
		e.mu.Unlock()
	}
}

// atRest reports whether e holds nothing at now that the process would
// lose by forgetting it: no cool-down or open breaker, no trial, no run
// of failures that Redis still keeps (failureWindow after it was last
// heard), nothing waiting for Redis, and no share of a quota that Redis
// still keeps (keep after its report).
func (e *entry) atRest(now time.Time, keep time.Duration) bool {
	q := &e.quota
	return !e.cooling.After(now) && !e.open.After(now) && !e.trial && !e.claiming &&
		(e.failures == 0 || now.Sub(e.failedAt) >= failureWindow) &&
		!e.pendingCool && !e.pendingOpen && !q.reporting && (q.reported.IsZero() || now.Sub(q.reported) >= keep)
}

// Held returns, at now, until when the fleet holds key's new attempts,
// from the process's view: no round trip, except once when an open
// breaker's time is over, to take its trial (SET NX, bounded by
// Options.Timeout). The call that takes it is told nothing holds; every
// other call, in this process or another, is held until the trial's
// outcome, or for as long as the breaker was open when its taker never
// tells one. No lock is held across the round trip: a call that comes
// while a claim is under way is held.
func (f *Fleet) Held(key string, now time.Time) (cooling, open time.Time) {
	if !f.up.Load() {
		return time.Time{}, time.Time{}
	}
	e := f.entry(key, false, now)
	if e == nil {
		return time.Time{}, time.Time{}
	}
	e.mu.Lock()
	cooling, open = e.cooling, e.open
	if e.trial && !now.Before(e.trialUntil) {
		e.trial = false // its outcome never came: the claim in Redis expired too
	}
	if open.IsZero() || now.Before(open) || e.trial || e.claiming {
		if e.trial || e.claiming {
			open = later(open, now.Add(time.Second))
		}
		e.mu.Unlock()
		return cooling, open
	}
	ttl := max(e.openFor, time.Second)
	e.claiming = true
	e.mu.Unlock()

	res, ok := f.do(func(ctx context.Context) rueidis.RedisResult {
		return f.c.Do(ctx, f.c.B().Set().Key(f.prefix+"trial:"+key).Value(f.id).Nx().PxMilliseconds(ttl.Milliseconds()).Build())
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	e.claiming = false
	switch {
	case !ok:
		return time.Time{}, time.Time{}
	case rueidis.IsRedisNil(res.Error()): // another process took it
		e.open, e.openAt = now.Add(ttl), now
		return cooling, e.open
	}
	e.trial, e.trialUntil = true, now.Add(ttl)
	return cooling, time.Time{}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Hold holds key's new attempts in every process until until: a
// cool-down (it only lengthens), or an open breaker. It runs one script
// in Redis, bounded by Options.Timeout; a time past now+1h is cut to it.
// A Hold that cannot reach Redis is shared once Redis is back, if its
// time has not passed.
func (f *Fleet) Hold(key string, until time.Time, open bool) {
	now := time.Now()
	d := min(until.Sub(now), maxHold)
	if d <= 0 || key == "" {
		return
	}
	d = max(d, time.Microsecond) // Redis keeps µs
	e := f.entry(key, true, now)
	if e == nil {
		return
	}
	e.mu.Lock()
	if open {
		e.open, e.openAt, e.openFor, e.trial = now.Add(d), now, d, false
	} else if now.Add(d).After(e.cooling) {
		e.cooling = now.Add(d)
	}
	e.mu.Unlock()
	if !f.up.Load() || !f.push(key, d, open) {
		e.mu.Lock()
		if open {
			e.pendingOpen = true
		} else {
			e.pendingCool = true
		}
		e.mu.Unlock()
	}
}

// push holds key in Redis for d from now.
func (f *Fleet) push(key string, d time.Duration, open bool) bool {
	set, kind := f.cool, "cool"
	if open {
		set, kind = f.open, "open"
	}
	_, ok := f.do(func(ctx context.Context) rueidis.RedisResult {
		return holdScript.Exec(ctx, f.c, []string{set, f.prefix + "trial:" + key, f.prefix + "share:" + key, f.prefix + "demand:" + key},
			[]string{key, strconv.FormatInt(d.Microseconds(), 10), f.channel, kind, strconv.FormatInt(max(f.reportLife().Milliseconds(), 1), 10)})
	})
	return ok
}

// Record counts an outcome at key in the fleet and returns the fleet's
// failures in a row, this one included. A failure costs one round trip;
// a success costs one only when the process heard of a run of failures
// to end, or holds the open breaker's trial, which the success closes. A
// trial that fails opens the breaker again, for as long as before.
func (f *Fleet) Record(key string, failed bool) int {
	if !f.up.Load() {
		return 0
	}
	var now time.Time
	if failed {
		now = time.Now()
	}
	e := f.entry(key, failed, now)
	if e == nil {
		return 0
	}
	if !failed {
		e.mu.Lock()
		trial, failures := e.trial, e.failures
		e.failures, e.trial = 0, false
		if trial {
			e.open = time.Time{}
		}
		e.mu.Unlock()
		switch {
		case trial:
			f.do(func(ctx context.Context) rueidis.RedisResult {
				return closeScript.Exec(ctx, f.c, []string{f.open, f.prefix + "trial:" + key, f.prefix + "fail:" + key},
					[]string{key, f.channel})
			})
		case failures > 0:
			f.do(func(ctx context.Context) rueidis.RedisResult {
				return okScript.Exec(ctx, f.c, []string{f.prefix + "fail:" + key}, []string{key, f.channel})
			})
		}
		return 0
	}
	res, ok := f.do(func(ctx context.Context) rueidis.RedisResult {
		return failScript.Exec(ctx, f.c, []string{f.prefix + "fail:" + key},
			[]string{key, f.channel, strconv.FormatInt(failureWindow.Milliseconds(), 10)})
	})
	if !ok {
		return 0
	}
	n, err := res.AsInt64()
	if err != nil || n < 1 || n > 1<<30 {
		f.refuse("failure count")
		return 0
	}
	e.mu.Lock()
	e.failures, e.failedAt = int(n), time.Now()
	trial, openFor := e.trial, e.openFor
	e.mu.Unlock()
	if trial {
		f.Hold(key, time.Now().Add(openFor), true)
	}
	return int(n)
}

// onMessage applies what another process (or this one) published:
// "kind|n|key", n µs or a count.
func (f *Fleet) onMessage(m rueidis.PubSubMessage) {
	f.messages.Add(1)
	kind, rest, ok1 := strings.Cut(m.Message, "|")
	num, key, ok2 := strings.Cut(rest, "|")
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case !ok1 || !ok2 || err != nil || key == "" || n < 0,
		kind != "cool" && kind != "open" && kind != "close" && kind != "fail" && kind != "ok" && kind != "share":
		f.invalid.Add(1)
		return
	}
	d := time.Duration(n) * time.Microsecond
	if (kind == "cool" || kind == "open") && (n > maxHold.Microseconds() || n == 0) {
		f.invalid.Add(1)
		return
	}
	now := time.Now()
	e := f.entry(key, kind == "cool" || kind == "open" || kind == "fail", now)
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch kind {
	case "cool":
		if now.Add(d).After(e.cooling) {
			e.cooling = now.Add(d)
		}
	case "open":
		e.open, e.openAt, e.openFor, e.trial = now.Add(d), now, d, false
	case "close":
		e.open, e.openAt, e.trial, e.failures = time.Time{}, now, false, 0
	case "fail":
		e.failures, e.failedAt = int(min(n, 1<<30)), now
	case "ok":
		e.failures = 0
	case "share":
		// The processes sharing key's quota changed: report again at the
		// next Take, for a share of the new number.
		switch q := &e.quota; {
		case q.reporting:
			q.heard = n // the report under way may have been answered before this
		case q.rate != 0 && n != q.processes: // not the echo of its own report
			q.stale = true
		}
	}
}

// subscribe keeps the process subscribed to the namespace's channel until
// Close, and syncs after every subscription.
func (f *Fleet) subscribe() {
	for f.ctx.Err() == nil {
		ctx := rueidis.WithOnSubscriptionHook(f.ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind != "subscribe" {
				return
			}
			f.subscribed.Store(true)
			// The hook runs on the connection's reader: the sync, which
			// waits for a reply, runs on a goroutine of its own.
			f.spawn(func() {
				if !f.sync() {
					f.probe()
				}
			})
		})
		err := f.c.Receive(ctx, f.c.B().Subscribe().Channel(f.channel).Build(), f.onMessage)
		f.subscribed.Store(false)
		if f.ctx.Err() != nil {
			return
		}
		f.down(fmt.Errorf("the subscription ended: %v", err))
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sync reads what the fleet holds from Redis into the view, and shares
// state again if the subscription is live. An entry out of bounds is
// skipped and counted as Invalid. A cool-down stays the later of
// the view's and Redis's; an open breaker is Redis's, unless the view
// heard of it after the sync began.
func (f *Fleet) sync() bool {
	if !f.subscribed.Load() {
		return false
	}
	began := time.Now()
	if !f.loadScripts() {
		return false
	}
	res, ok := f.do(func(ctx context.Context) rueidis.RedisResult {
		return syncScript.Exec(ctx, f.c, []string{f.cool, f.open}, nil)
	})
	if !ok {
		return false
	}
	sets, err := res.ToArray()
	if err != nil || len(sets) != 2 {
		f.refuse("sync reply")
		return false
	}
	var held [2]map[string]time.Duration
	for i, s := range sets {
		list, err := s.ToArray()
		if err != nil || len(list)%2 != 0 {
			f.refuse("sync reply")
			return false
		}
		held[i] = make(map[string]time.Duration, len(list)/2)
		for j := 0; j < len(list); j += 2 {
			key, err1 := list[j].ToString()
			us, err2 := list[j+1].ToString()
			n, err3 := strconv.ParseInt(us, 10, 64)
			if err1 != nil || err2 != nil || err3 != nil || key == "" || n <= 0 || n > maxHold.Microseconds() {
				// Not the fleet's (or not any more): skipped, so that one
				// bad entry does not keep every process from sharing.
				f.invalid.Add(1)
				continue
			}
			held[i][key] = time.Duration(n) * time.Microsecond
		}
	}
	now := time.Now()
	for _, m := range held {
		for key := range m {
			f.entry(key, true, now)
		}
	}
	f.mu.RLock()
	for key, e := range f.keys {
		e.mu.Lock()
		if d, ok := held[0][key]; ok && now.Add(d).After(e.cooling) {
			e.cooling = now.Add(d)
		}
		if d, ok := held[1][key]; ok {
			if !e.openAt.After(began) {
				e.open, e.openFor = now.Add(d), max(e.openFor, d)
			}
		} else if !e.openAt.After(began) && !e.trial && !e.pendingOpen {
			e.open = time.Time{}
		}
		e.mu.Unlock()
	}
	f.mu.RUnlock()
	if !f.subscribed.Load() {
		return false
	}
	if !f.up.Swap(true) {
		first := false
		select {
		case <-f.synced:
		default:
			close(f.synced)
			first = true
		}
		if !first || f.downs.Load() > 0 {
			f.log.Info("httpretry/fleet: Redis is back; the processes share state again")
		}
	}
	f.pushPending()
	return true
}

// pushPending shares the Holds that could not reach Redis while it was
// down and whose time has not passed.
func (f *Fleet) pushPending() {
	type hold struct {
		key  string
		d    time.Duration
		open bool
	}
	var holds []hold
	now := time.Now()
	f.mu.RLock()
	for key, e := range f.keys {
		e.mu.Lock()
		if e.pendingCool && e.cooling.After(now) {
			holds = append(holds, hold{key, e.cooling.Sub(now), false})
		}
		if e.pendingOpen && e.open.After(now) {
			holds = append(holds, hold{key, e.open.Sub(now), true})
		}
		e.pendingCool, e.pendingOpen = false, false
		e.mu.Unlock()
	}
	f.mu.RUnlock()
	for _, h := range holds {
		if !f.push(h.key, h.d, h.open) {
			f.Hold(h.key, now.Add(h.d), h.open) // pending again, for the next return
		}
	}
}

// loadScripts loads the Fleet's scripts into Redis, in one round trip.
func (f *Fleet) loadScripts() bool {
	cmds := make(rueidis.Commands, len(scriptSources))
	for i, src := range scriptSources {
		cmds[i] = f.c.B().ScriptLoad().Script(src).Build()
	}
	f.commands.Add(int64(len(cmds)))
	results, err := bounded(max(f.timeout, 100*time.Millisecond), func(ctx context.Context) []rueidis.RedisResult {
		return f.c.DoMulti(ctx, cmds...)
	})
	if err == nil && len(results) != len(cmds) {
		err = errors.New("a reply short of its commands")
	}
	for _, res := range results {
		if err == nil {
			err = res.Error()
		}
	}
	if err != nil {
		f.down(fmt.Errorf("loading the scripts: %w", err))
		return false
	}
	return true
}
