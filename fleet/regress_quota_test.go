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
