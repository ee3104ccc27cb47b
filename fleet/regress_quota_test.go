package fleet_test

import (
	"math"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Symptom: a valid quota with an interval over an hour (1 per 2 h) makes the second lease's reply fail validation (first > maxHold): the whole Fleet goes down.
func TestRegressQuotaLongIntervalTakesFleetDown(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	q := httpretry.Quota{Limit: 1, Per: 2 * time.Hour}
	if wait, ok := a.Take("acct", q, time.Now(), time.Second); !ok || wait > 50*time.Millisecond {
		t.Fatalf("first Take: %v %v", wait, ok)
	}
	wait, ok := a.Take("acct", q, time.Now(), time.Second)
	if st := a.Stats(); !ok || !st.Up || st.Invalid != 0 {
		t.Errorf("second Take of a 1-per-2h quota: wait %v ok %v, Stats %+v; want ok, about 2h, the fleet still up", wait, ok, st)
	}
}

// Symptom: a valid quota faster than 1/µs with Burst >= 3 (10M/s, burst 100) has its lease reply refused (the bound uses interval.Microseconds()==0): the whole Fleet goes down at every lease.
func TestRegressQuotaSubMicrosecondIntervalTakesFleetDown(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	q := httpretry.Quota{Limit: 10_000_000, Per: time.Second, Burst: 100}
	wait, ok := a.Take("acct", q, time.Now(), time.Second)
	if st := a.Stats(); !ok || !st.Up || st.Invalid != 0 {
		t.Errorf("Take of a 10M/s burst-100 quota: %v %v, Stats %+v; want ok and the fleet up", wait, ok, st)
	}
}

// Symptom: Take with a huge within (wait as long as it takes) overflows horizon = within+LeaseFor, the lease takes no turn, and Take answers wait 0: every call goes at once, the quota is not kept.
func TestRegressTakeHugeWithinGrantsFreeTurns(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	q := httpretry.Quota{Limit: 1, Per: time.Hour}
	free := 0
	for range 5 {
		if wait, ok := a.Take("acct", q, time.Now(), time.Duration(math.MaxInt64)); ok && wait < time.Minute {
			free++
		}
	}
	if free > 1 {
		t.Errorf("%d of 5 Takes of a 1-per-hour quota went within a minute", free)
	}
}

// Symptom: a process that joins another that has only made its first
// report (whose demand is the whole rate until it is measured) waits
// 80 ms for its first turn, and that wait counted against the 100 ms of
// turns it may queue: a fourth call in the same moment was refused, with
// the fleet under the quota (e2e TestFleetCost, CI run 35: 13 calls
// ErrRateLimited at 90/s of a 100/s quota).
func TestRegressJoinWaitRefusesTurnsUnderTheQuota(t *testing.T) {
	srv := fleettest.Start(t)
	a, b := process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})
	q := httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10}
	if _, ok := a.Take("acct", q, time.Now(), time.Second); !ok {
		t.Fatal("a's first Take: not shared")
	}
	now := time.Now()
	var waits []time.Duration
	for range 4 {
		wait, ok := b.Take("acct", q, now, time.Second)
		if !ok {
			t.Fatal("b's Take: not shared")
		}
		waits = append(waits, wait)
	}
	for i, w := range waits {
		if w > time.Second {
			t.Errorf("call %d of 4 at once in the joining process was refused (wait %v; all: %v), want a turn within 1 s", i+1, w, waits)
		}
	}
}

// Symptom: processes held by a cool-down take no turns for longer than
// Redis keeps their reports (three LeaseFor); at its end the first to
// report was told it was alone, with the whole rate and burst, and each
// that followed reported the few turns it took over the whole gap as its
// demand, so none of them waited for the first one's queued turns: the
// fleet sent its burst several times over, and 11 429s reached the
// upstream in the second after a 3 s cool-down (e2e
// TestFleetSharedCoolDown).
func TestRegressRejoinAfterAGapOvershoots(t *testing.T) {
	srv := fleettest.Start(t)
	opts := fleet.Options{LeaseFor: 100 * time.Millisecond}
	a, b := process(t, srv, opts), process(t, srv, opts)
	q := httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10}
	// Both share the quota, then are held past their reports' life.
	shareFor(q, 1, time.Second, a, b)
	time.Sleep(400 * time.Millisecond)
	now := time.Now()
	soon := 0 // turns within 15 ms of now
	for _, p := range []*fleet.Fleet{a, b} {
		for range 15 {
			if wait, ok := p.Take("acct", q, now, time.Second); ok && wait < 15*time.Millisecond {
				soon++
			}
		}
	}
	// The quota's burst, and a turn and a half at its rate.
	if soon > 12 {
		t.Errorf("%d turns within 15 ms of a 100/s quota with burst 10, after both processes rejoined", soon)
	}
}

// Symptom: a cool-down longer than Redis keeps the reports (three
// LeaseFor) let every report expire while the processes were held, so
// the first to take a turn at its end was told it was alone, with the
// whole rate and burst, and spent the burst before the others rejoined:
// 6 to 20 429s reached the upstream in the second after a 3 s cool-down
// (e2e TestFleetSharedCoolDown). The cool-down keeps the reports of the
// processes it holds alive past its end.
func TestRegressCoolDownOutlivesTheShares(t *testing.T) {
	a, _, q := twoWantingAll(t)
	// Both want the whole rate, then a 429 holds them past their reports' life.
	a.Hold("acct", time.Now().Add(400*time.Millisecond), false)
	time.Sleep(450 * time.Millisecond)
	// Half the rate (b still shares it): half the burst at once.
	if turns := turnsAtOnce(t, a, q); turns > 6 {
		t.Errorf("the first process to take turns after a cool-down took %d at once, want at most half the quota's burst of 10", turns)
	}
}

// twoWantingAll returns two processes that have shared "acct"'s quota q
// (100/s, burst 10; LeaseFor 100 ms), each wanting all of it.
func twoWantingAll(t *testing.T) (a, b *fleet.Fleet, q httpretry.Quota) {
	srv := fleettest.Start(t)
	opts := fleet.Options{LeaseFor: 100 * time.Millisecond}
	a, b = process(t, srv, opts), process(t, srv, opts)
	q = httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10}
	shareFor(q, 20, 0, a, b)
	return a, b, q
}

// turnsAtOnce returns how many of 20 Takes by p at "acct"'s quota q, at
// one instant, get a turn without waiting.
func turnsAtOnce(t *testing.T, p *fleet.Fleet, q httpretry.Quota) int {
	now := time.Now()
	turns := 0
	for range 20 {
		wait, ok := p.Take("acct", q, now, 0)
		if !ok {
			t.Fatal("Take: not shared")
		}
		if wait == 0 {
			turns++
		}
	}
	return turns
}

// shareFor has each process take n turns at "acct"'s quota q, at most
// within away, three times 110 ms apart: a LeaseFor of 100 ms reports
// each time.
func shareFor(q httpretry.Quota, n int, within time.Duration, ps ...*fleet.Fleet) {
	for range 3 {
		for _, p := range ps {
			for range n {
				p.Take("acct", q, time.Now(), within)
			}
		}
		time.Sleep(110 * time.Millisecond)
	}
}

// Symptom: one report during a cool-down (the pacer's probe, once a
// ProbeEvery, or a process that had not heard of it yet) set its share's
// keys to expire at the report's own lifetime, undoing what the cool-down
// kept alive: at its end the first process was alone with the whole burst
// again (found in review).
func TestRegressReportDuringCoolDownUndoesTheKeep(t *testing.T) {
	a, b, q := twoWantingAll(t)
	a.Hold("acct", time.Now().Add(1200*time.Millisecond), false)
	time.Sleep(150 * time.Millisecond)
	b.Take("acct", q, time.Now(), 0) // one turn during the cool-down
	time.Sleep(1100 * time.Millisecond)
	if turns := turnsAtOnce(t, a, q); turns > 6 {
		t.Errorf("after a cool-down with one report in it, the first process took %d turns at once, want at most half the burst of 10", turns)
	}
}
