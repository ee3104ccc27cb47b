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
	time.Sleep(5 * time.Millisecond) // the 10,000 cool-downs are over
	a.Hold("new.example:443", time.Now().Add(time.Minute), false)
	if cooling, _ := a.Held("new.example:443", time.Now()); !cooling.After(time.Now()) {
		t.Errorf("a cool-down for a new host after 10,000 others ended is not held: %v", cooling)
	}
	if cooling, _ := a.Held("live.example:443", time.Now()); !cooling.After(time.Now()) {
		t.Errorf("a cool-down still running was forgotten to make room: %v", cooling)
	}
}
