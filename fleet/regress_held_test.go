package fleet_test

import (
	"sync"
	"testing"
	"time"

	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Symptom: with Redis silent, concurrent Helds at an expired open breaker queue on entry.mu and each sends its own SET NX, so the k-th waits k×Timeout.
func TestRegressHeldTrialQueuesTimeouts(t *testing.T) {
	srv := fleettest.Start(t)
	proxy := newStallProxy(t, srv.Addr)
	const timeout = 50 * time.Millisecond
	f := processAt(t, proxy.ln.Addr().String(), fleet.Options{Timeout: timeout})
	const key = "dead.example.com:443"
	f.Hold(key, time.Now().Add(50*time.Millisecond), true)
	time.Sleep(100 * time.Millisecond) // the breaker's time is over: the next Held claims the trial
	proxy.stall.Store(true)
	defer proxy.stall.Store(false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for range 10 {
		wg.Go(func() {
			start := time.Now()
			f.Held(key, time.Now())
			took := time.Since(start)
			mu.Lock()
			worst = max(worst, took)
			mu.Unlock()
		})
	}
	wg.Wait()
	if worst > timeout+100*time.Millisecond {
		t.Errorf("a Held took %v with Redis silent, Timeout %v", worst, timeout)
	}
}
