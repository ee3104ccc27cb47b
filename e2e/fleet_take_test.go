package e2e

import (
	"sync"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/redis/rueidis"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Calls that wait for one another's lease of the quota while Redis goes
// slow each wait at most about Options.Timeout, not a Timeout each in
// turn: before the fix in Take (it checks that Redis is still up once it
// holds the key's lock), ten concurrent Takes took 56 ms at a 5 ms
// Timeout, one lease timing out after another.
func TestFleetTakeBoundedWhileRedisSlow(t *testing.T) {
	red := fleettest.Start(t)
	p := startToxiproxy(t).proxy(t, red.Addr)
	rc, err := rueidis.NewClient(fleet.ClientOption(p.Listen))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	f, err := fleet.New(rc, fleet.Options{Timeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Stats().Up {
		t.Fatal("not up")
	}
	if _, err := p.AddToxic("lat", "latency", "downstream", 1, toxiclient.Attributes{"latency": 200}); err != nil {
		t.Fatal(err)
	}
	q := httpretry.Quota{Limit: 100, Burst: 10}
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			began := time.Now()
			f.Take("k", q, began, time.Second)
			d := time.Since(began)
			mu.Lock()
			worst = max(worst, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("10 concurrent Takes while Redis answers in 200 ms, Timeout 5 ms: the slowest took %v; stats %+v", worst, f.Stats())
	if worst > 30*time.Millisecond {
		t.Errorf("a Take waited %v, want ≤ Timeout + slack", worst)
	}
}
