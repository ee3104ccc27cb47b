package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Symptom: a process that had talked to 10,000 host keys kept every one
// of them for good, at rest or not, and shared nothing about any new host
// after that: a cool-down it was told for one was not even kept by
// itself. Keys at rest are now forgotten to make room; one still held is
// kept.
func TestRegressFullKeyTableSharesNoNewHost(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	now := time.Now()
	a.Hold("live.example:443", now.Add(time.Minute), false)
	for i := range 10_000 {
		a.Hold(fmt.Sprintf("h%d.example:443", i), time.Now().Add(time.Millisecond), false)
	}
	time.Sleep(1100 * time.Millisecond) // the 10,000 cool-downs are over, and no caller holds their entries
	a.Hold("new.example:443", time.Now().Add(time.Minute), false)
	if cooling, _ := a.Held("new.example:443", time.Now()); !cooling.After(time.Now()) {
		t.Errorf("a cool-down for a new host after 10,000 others ended is not held: %v", cooling)
	}
	if cooling, _ := a.Held("live.example:443", time.Now()); !cooling.After(time.Now()) {
		t.Errorf("a cool-down still running was forgotten to make room: %v", cooling)
	}
}

// Symptom: a key whose run of failures the process once heard was never
// at rest, although Redis forgets the run a minute after its last failure:
// a process whose 10,000 hosts each failed once shared no new host for
// good (found in review).
func TestRegressFailedKeysNeverAtRest(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	for i := range 10_000 {
		a.Record(fmt.Sprintf("h%d.example:443", i), true)
	}
	srv.Do("FLUSHALL") // as Redis is a minute later: every run of failures expired
	fleet.AgeFailuresForTest(a, 61*time.Second)
	time.Sleep(1100 * time.Millisecond) // past the once-a-second bound on sweeps
	a.Hold("new.example:443", time.Now().Add(time.Minute), false)
	if cooling, _ := a.Held("new.example:443", time.Now()); !cooling.After(time.Now()) {
		t.Errorf("a cool-down for a new host after 10,000 hosts failed once each is not held: %v", cooling)
	}
}

// Symptom: a value of another type at ns:share:KEY failed the script of
// every cool-down at KEY after the cool-down was stored and before it was
// published: the Fleet counted Redis down, and the others heard of it
// only at their next sync (found in review).
func TestRegressWrongTypeShareKeyFailsTheHold(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	b := process(t, srv, fleet.Options{})
	srv.Do("SET " + t.Name() + ":share:acct x")
	a.Hold("acct", time.Now().Add(time.Minute), false)
	time.Sleep(100 * time.Millisecond)
	if st := a.Stats(); st.Downs != 0 {
		t.Errorf("a Hold counted Redis down: %+v", st)
	}
	if cooling, _ := b.Held("acct", time.Now()); !cooling.After(time.Now()) {
		t.Errorf("b was not told of a's cool-down")
	}
}
