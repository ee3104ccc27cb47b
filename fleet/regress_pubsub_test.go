package fleet_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Symptom: onMessage waits for entry.mu, which Take holds across its lease round trip; a burst of >16 messages for that key fills rueidis's subscriber buffer, the connection's reader blocks, and the lease's reply behind them is never read: the lease times out and the Fleet goes down with Redis healthy.
func TestRegressMessageBurstDuringLeaseTimesOut(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{Timeout: 300 * time.Millisecond, LeaseFor: time.Microsecond})
	pub, err := rueidis.NewClient(fleet.ClientOption(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	q := httpretry.Quota{Limit: 1_000_000} // 1 µs a turn: with LeaseFor 1 µs, every Take leases
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			cmds := make(rueidis.Commands, 40)
			for i := range cmds {
				cmds[i] = pub.B().Publish().Channel(t.Name() + ":events").Message("fail|1|acct").Build()
			}
			pub.DoMulti(context.Background(), cmds...)
			time.Sleep(5 * time.Millisecond)
		}
	})
	var worst time.Duration
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && worst < 250*time.Millisecond {
		start := time.Now()
		a.Take("acct", q, time.Now(), time.Second)
		worst = max(worst, time.Since(start))
	}
	stop.Store(true)
	wg.Wait()
	if worst > 100*time.Millisecond {
		t.Errorf("with Redis healthy and messages arriving, a Take took %v (Timeout 300ms; Stats %+v)", worst, a.Stats())
	}
}
