package fleet

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/seedhq/httpretry"
)

// A quota that a policy declares (httpretry.Quota) is shared as a rate:
// every LeaseFor, each process that calls the quota's host reports in
// Redis the rate it wants (the turns it asked for since its last report)
// and gets back its share of the quota's rate, max-min fair among the
// processes that reported within the last three LeaseFor; it then paces
// its calls by that share, from memory, with its share of the burst. So
// the steady state costs one round trip a LeaseFor per process, a
// process that wants little is never held behind one that wants much,
// and the fleet sends at most the quota while the shares are current.
// When they are not, the fleet can send more: a process that joins takes
// its share at once, while the others pace by their old ones until their
// next report, which the newcomer's first report asks of them at once
// (a message on the channel), and by the turns they already queued, at
// most LeaseFor of them.

// quotaShare is a process's share of one quota, and its pacing by it.
type quotaShare struct {
	rate      float64   // this process's share, requests a second; 0 before the first report
	burst     float64   // its share of the quota's burst, at least 1
	tat       time.Time // the theoretical arrival time of its next turn (GCRA at rate)
	after     time.Time // no turn before: the others' queued turns go first (it joined them)
	takes     int       // the Takes since the last report: the demand
	reported  time.Time // when the share was last reported
	quotaRate float64   // the quota's rate the share was computed for
	stale     bool      // the processes sharing the quota changed since: report again
	processes int64     // how many shared it at the last report
	reporting bool      // a report is under way
	heard     int64     // the processes a message told of while it was: 0 none
}

// Take takes a turn at key's quota q for an attempt at now, at most
// within away, by this process's share of q's rate, and reports its
// demand to Redis for a new share (one script, bounded by
// Options.Timeout) once the share is LeaseFor old. It returns how long
// the attempt waits for its turn; when the turn is further than within,
// none is taken. ok is false when q declares no rate or Redis cannot be
// reached, and while the process's first report is under way: the
// process paces by q alone. No lock is held across the round trip: the
// calls that come meanwhile pace by the share the process has.
//
// While Redis is down or a report fails, a process whose share is at
// most three LeaseFor old (as long as Redis keeps it) paces by that
// share, not by q alone: every process that held one does the same, so
// the fleet still sends about the quota, not the quota once per process.
func (f *Fleet) Take(key string, q httpretry.Quota, now time.Time, within time.Duration) (wait time.Duration, ok bool) {
	if q.Limit <= 0 {
		return 0, false
	}
	rate := float64(q.Limit) / cmp.Or(q.Per, time.Second).Seconds()
	if !(rate > 0) {
		return 0, false
	}
	up := f.up.Load()
	e := f.entry(key, up, now)
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.quota
	s.takes++
	due := s.rate == 0 || s.stale || s.quotaRate != rate || now.Sub(s.reported) >= f.leaseFor || now.Before(s.reported)
	if due && !s.reporting && up {
		// The first report asks for all of it: an equal share among those
		// that want it. So does one after Redis forgot the last (three
		// LeaseFor: the process was held by a cool-down, or idle): the
		// few turns it took over the gap are no measure of what it wants
		// now, and the others must wait for the turns it queues.
		demand := rate
		if !s.reported.IsZero() && s.quotaRate == rate && now.Sub(s.reported) < f.reportLife() {
			if since := now.Sub(s.reported).Seconds(); since > 0 {
				demand = min(rate, float64(s.takes)/since)
			}
		}
		s.reporting = true
		e.mu.Unlock()
		share, n, collides, ok := f.report(key, demand, rate)
		e.mu.Lock()
		s.reporting = false
		if !ok {
			return s.paceByOld(now, rate, within, f)
		}
		if collides {
			// It joins others that want the whole rate: they pace by their
			// old shares until they hear of this one, and their queued
			// turns (f.queue() at most) go at those, so its first turn
			// waits about as long. Under the quota it does not.
			s.after = time.Now().Add(f.queue() * 4 / 5)
			s.burst = 1
		}
		s.rate, s.quotaRate = share, rate
		if !collides {
			s.burst = max(1, float64(max(q.Burst, 1))*share/rate)
		}
		s.takes, s.reported, s.processes = 0, now, n
		s.stale, s.heard = s.heard != 0 && s.heard != n, 0
	}
	if !up {
		return s.paceByOld(now, rate, within, f)
	}
	if s.rate == 0 || s.quotaRate != rate {
		return 0, false // the first report for this rate is under way
	}
	return s.pace(now, within, f)
}

// paceByOld paces by s's share while Redis cannot give a new one, for as
// long as Redis would have kept it (three LeaseFor); past that, or with
// no share for rate, the process paces by the quota alone (ok false).
func (s *quotaShare) paceByOld(now time.Time, rate float64, within time.Duration, f *Fleet) (time.Duration, bool) {
	if s.rate == 0 || s.quotaRate != rate || now.Sub(s.reported) >= f.reportLife() || now.Before(s.reported) {
		return 0, false
	}
	return s.pace(now, within, f)
}

// pace takes a turn at s's share (GCRA), as Take describes.
func (s *quotaShare) pace(now time.Time, within time.Duration, f *Fleet) (wait time.Duration, ok bool) {
	interval := time.Duration(float64(time.Second) / s.rate)
	tolerance := time.Duration((s.burst - 1) * float64(interval))
	from := now // turns are queued from now, or from s.after
	if s.after.After(from) {
		from = s.after
	}
	t := s.tat
	if t.Before(from) {
		t = from
	}
	queued := max(t.Sub(from)-tolerance, 0)
	wait = from.Sub(now) + queued
	switch {
	case wait > within:
		return wait, true
	case queued > f.queue():
		// A process queues at most f.queue() of turns at its share: a
		// turn further away may no longer be its share when it comes
		// (another process joined). Refused, as a turn past within is.
		// The wait for s.after is not a turn queued: it is the others'.
		return max(wait, within+time.Millisecond), true
	}
	s.tat = t.Add(interval)
	return wait, true
}

// report tells Redis the rate this process wants of key's quota, whose
// rate is rate, and returns its share and how many processes share it.
func (f *Fleet) report(key string, demand, rate float64) (share float64, processes int64, collides, ok bool) {
	ttl := f.reportLife()
	f.leases.Add(1)
	res, ok := f.do(func(ctx context.Context) rueidis.RedisResult {
		return shareScript.Exec(ctx, f.c, []string{f.prefix + "share:" + key, f.prefix + "demand:" + key}, []string{
			f.id, strconv.FormatFloat(demand, 'g', -1, 64), strconv.FormatFloat(rate, 'g', -1, 64),
			strconv.FormatInt(max(ttl.Milliseconds(), 1), 10), f.channel, key})
	})
	if !ok {
		return 0, 0, false, false
	}
	v, err := res.ToArray()
	if err != nil || len(v) != 3 {
		f.refuse("share reply")
		return 0, 0, false, false
	}
	str, err1 := v[0].ToString()
	share, err2 := strconv.ParseFloat(str, 64)
	n, err3 := v[1].AsInt64()
	j, err4 := v[2].AsInt64()
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !(share > 0) || share > rate*1.001 || n < 1 {
		f.refuse("share reply")
		return 0, 0, false, false
	}
	return min(share, rate), n, j == 1, true
}

// reportLife is how long Redis keeps a process's report of its demand
// for a quota: three LeaseFor; the processes that reported within them
// share the quota.
func (f *Fleet) reportLife() time.Duration { return 3 * f.leaseFor }

// queue is the longest a process queues turns at its share: a quarter of
// LeaseFor, at most 100 ms. It bounds what the fleet sends past the quota
// while a process joins.
func (f *Fleet) queue() time.Duration { return min(f.leaseFor/4, 100*time.Millisecond) }
