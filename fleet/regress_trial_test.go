package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Symptom: after the trial is claimed, every later Held in the taker's process answers "not open" (e.trial), so all its calls go to the dead host; the reference (httpretrytest.Fleet) lets one through and holds the rest.
func TestRegressTrialTakerLetsEveryCallThrough(t *testing.T) {
	ref := &httpretrytest.Fleet{}
	ref.Hold("k", time.Now().Add(50*time.Millisecond), true)
	time.Sleep(60 * time.Millisecond)
	ref.Held("k", time.Now())
	if _, open := ref.Held("k", time.Now()); open.IsZero() {
		t.Fatal("the reference lets a second call through during the trial")
	}

	srv := fleettest.Start(t)
	a, b := process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})
	const key = "dead.example.com:443"
	a.Hold(key, time.Now().Add(100*time.Millisecond), true)
	eventually(t, time.Second, func() bool { _, open := b.Held(key, time.Now()); return !open.IsZero() }, "b never heard")
	time.Sleep(150 * time.Millisecond)
	if _, open := a.Held(key, time.Now()); !open.IsZero() {
		t.Fatal("a did not take the trial")
	}
	let := 0
	for range 5 {
		if _, open := a.Held(key, time.Now()); open.IsZero() {
			let++
		}
	}
	if let > 0 {
		t.Errorf("%d of 5 further calls in the trial's taker were let through while its trial is out", let)
	}
}

// Symptom: a taker whose trial never reports keeps e.trial forever, while Redis's claim expires and another process claims a second trial: two processes are unheld at once, indefinitely.
func TestRegressUnreportedTrialIsNeverForgotten(t *testing.T) {
	srv := fleettest.Start(t)
	a, b := process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})
	const key = "dead.example.com:443"
	a.Hold(key, time.Now().Add(100*time.Millisecond), true)
	eventually(t, time.Second, func() bool { _, open := b.Held(key, time.Now()); return !open.IsZero() }, "b never heard")
	time.Sleep(150 * time.Millisecond)
	if _, open := a.Held(key, time.Now()); !open.IsZero() {
		t.Fatal("a did not take the trial")
	}
	// a's attempt never reports (cancelled, refused later): its claim in
	// Redis expires after max(openFor, 1s).
	time.Sleep(1200 * time.Millisecond)
	var unheld []string
	for name, p := range map[string]*fleet.Fleet{"b": b, "a": a} {
		if _, open := p.Held(key, time.Now()); open.IsZero() {
			unheld = append(unheld, name)
		}
	}
	if len(unheld) > 1 {
		t.Errorf("processes %v are all unheld by the fleet's open breaker: %s", unheld, fmt.Sprint(len(unheld), " trials out"))
	}
}
