package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// region is one endpoint of the failover test: an httptest server in
// front of the ledger both regions share (a payment applied in one is
// known to the other, as a replicated store's would be), answering 503
// while it is down.
type region struct {
	srv      *httptest.Server
	down     atomic.Bool
	keyed    atomic.Int64 // keyed POSTs that arrived
	unkeyed  atomic.Int64 // unkeyed POSTs that arrived
	answered atomic.Int64 // requests the ledger answered here
}

func newRegion(t *testing.T, l *ledger) *region {
	r := &region{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Idempotency-Key") != "" {
			r.keyed.Add(1)
		} else if req.Method == http.MethodPost {
			r.unkeyed.Add(1)
		}
		if r.down.Load() {
			http.Error(w, "region down", http.StatusServiceUnavailable)
			return
		}
		r.answered.Add(1)
		l.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// Regional failover: the primary answers 503 for a while, then recovers.
// Keyed POSTs fail over to the second region and are applied once each
// across both; unkeyed POSTs never leave the primary; once it recovers,
// traffic is back on it within its breaker's OpenFor.
func TestRegionalFailover(t *testing.T) {
	const (
		workers = 4
		downFor = 30 * time.Second // the outage: long enough for the breaker to open and half-open many times
		openFor = 500 * time.Millisecond
		after   = 2 * time.Second // traffic after the recovery
	)
	l := newLedger()
	eu, us := newRegion(t, l), newRegion(t, l)
	usHost := mustHost(t, us.srv.URL)
	tr := &httpretry.Transport{Hosts: map[string]httpretry.Policy{mustHost(t, eu.srv.URL): {
		Backoff:   backoff.Constant(5 * time.Millisecond),
		Breaker:   httpretry.BreakerPolicy{ConsecutiveFailures: 5, OpenFor: openFor},
		Endpoints: []string{usHost},
	}}}
	// A keyed POST that fails is named with why its call stopped: one in
	// 36,058 did once (a full .ci/run of stop 35; none applied twice),
	// for a reason not yet found.
	tr.OnCall = func(c httpretry.Call) {
		if key := c.Request.Header.Get("Idempotency-Key"); key != "" && (c.Err != nil || c.Response.StatusCode != http.StatusOK) {
			status := 0
			if c.Response != nil {
				status = c.Response.StatusCode
			}
			t.Logf("keyed POST %s failed: %d attempts, stop %v, status %d, err %v, after %v", key, c.Attempts, c.Stop, status, c.Err, c.Duration)
		}
	}
	require.NoError(t, tr.Validate())
	defer tr.CloseIdleConnections()

	eu.down.Store(true)
	start := time.Now()
	var recovered atomic.Int64 // Unix nanoseconds of the recovery
	var backOnPrimary atomic.Int64
	go func() {
		time.Sleep(downFor)
		recovered.Store(time.Now().UnixNano())
		eu.down.Store(false)
	}()

	type tally struct {
		keyed, keyedOK, unkeyed, unkeyedOK, unkeyedRefused int
		keys                                               []string
	}
	var mu sync.Mutex
	var all tally
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mine tally
			for i := 0; time.Since(start) < downFor+after; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if i%4 == 3 {
					// An unkeyed POST: not safe to send twice, never moved.
					ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { p.Keys.Disabled = true })
					r, err := send(ctx, tr, http.MethodPost, eu.srv.URL+"/pay", "amount=1&id="+id, http.Header{"X-Request-Id": {id}})
					require.NoError(t, err)
					mine.unkeyed++
					switch {
					case r.status == 200:
						mine.unkeyedOK++
					case r.err != nil:
						mine.unkeyedRefused++
					}
					continue
				}
				key := "key-" + id
				r := mustSend(t, tr, http.MethodPost, eu.srv.URL+"/pay", "amount=1&id="+id, http.Header{"Idempotency-Key": {key}})
				mine.keyed++
				mine.keys = append(mine.keys, key)
				if r.status == 200 {
					mine.keyedOK++
				}
				if rec := recovered.Load(); rec != 0 && backOnPrimary.Load() == 0 && r.status == 200 && eu.answered.Load() > 0 {
					backOnPrimary.CompareAndSwap(0, time.Now().UnixNano())
				}
				time.Sleep(2 * time.Millisecond)
			}
			mu.Lock()
			all.keyed += mine.keyed
			all.keyedOK += mine.keyedOK
			all.unkeyed += mine.unkeyed
			all.unkeyedOK += mine.unkeyedOK
			all.unkeyedRefused += mine.unkeyedRefused
			all.keys = append(all.keys, mine.keys...)
			mu.Unlock()
		})
	}
	wg.Wait()

	s := l.stats()
	twice := 0
	for _, k := range all.keys {
		if l.appliedKey(k) != 1 {
			twice++
		}
	}
	back := time.Duration(backOnPrimary.Load() - recovered.Load())
	euStats := hostStats(tr, mustHost(t, eu.srv.URL))
	usStats := hostStats(tr, usHost)

	assert.Zero(t, twice, "every keyed POST applied exactly once across both regions")
	assert.Equal(t, all.keyed, all.keyedOK, "every keyed POST succeeded, on one region or the other")
	assert.Zero(t, us.unkeyed.Load(), "no unkeyed POST moved to the second region")
	assert.Equal(t, 1, s.maxID, "no unkeyed POST applied twice")
	assert.Positive(t, us.keyed.Load(), "keyed POSTs failed over")
	require.NotZero(t, backOnPrimary.Load(), "traffic back on the primary")
	assert.LessOrEqual(t, back, openFor+500*time.Millisecond, "back on the primary within its breaker's OpenFor (and slack for a loaded machine)")

	figure(t, "Regional failover", "httpretry, primary 503 for %v then recovered, failover endpoint %s, breaker ConsecutiveFailures 5 / OpenFor %v, %d goroutines for %v: %d keyed POSTs, %d succeeded (%.2f %%), %d applied more than once (the ledger, shared by both regions, dedupes by key; most applications of one key: %d)",
		downFor, "127.0.0.1:<port>", openFor, workers, downFor+after, all.keyed, all.keyedOK, pct(all.keyedOK, all.keyed), twice, s.maxKey)
	figure(t, "Regional failover", "keyed POST arrivals: %d at the primary (503s included), %d at the failover endpoint; breaker refusals at the primary: %d; attempts in Stats per endpoint: primary %d, failover %d",
		eu.keyed.Load(), us.keyed.Load(), euStats.breakerRefusals, euStats.attempts, usStats.attempts)
	figure(t, "Regional failover", "unkeyed POSTs: %d sent, %d arrived at the failover endpoint (never moved), %d succeeded on the primary, %d refused by its open breaker, most applications of one: %d",
		all.unkeyed, us.unkeyed.Load(), all.unkeyedOK, all.unkeyedRefused, s.maxID)
	figure(t, "Regional failover", "back on the primary %v after it recovered (OpenFor %v); command: `cd e2e && go test -race -run TestRegionalFailover -v .`",
		back.Round(time.Millisecond), openFor)
}

func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Host
}

type endpointStats struct{ attempts, breakerRefusals int64 }

// hostStats returns what Stats holds for host ("host:port"), zero without
// an entry.
func hostStats(tr *httpretry.Transport, host string) endpointStats {
	for _, s := range tr.Stats() {
		if s.Host == host {
			e := endpointStats{attempts: s.Attempts}
			if s.Breaker != nil {
				e.breakerRefusals = s.Breaker.Refusals
			}
			return e
		}
	}
	return endpointStats{}
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
