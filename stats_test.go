package httpretry_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// hostsBase answers 503 for hosts whose name starts with "down", 200 for
// the others.
var hostsBase = httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
	code := http.StatusOK
	if strings.HasPrefix(req.URL.Host, "down") {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Request: req}, nil
})

// TestStatsWhileTrafficFlows reads Stats in a loop while goroutines send
// requests that fail, retry, drain budgets and trip breakers, and create
// and drop host state: under -race, it proves the snapshot is safe to take
// at any time, and every snapshot must be sorted and consistent.
func TestStatsWhileTrafficFlows(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{Base: hostsBase, Policy: httpretry.Policy{
		Backoff: backoff.Constant(0),
		Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 20, OpenFor: time.Millisecond},
	}}
	const workers, requests = 4, 300
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range requests {
				host := fmt.Sprintf("down-%d.example.com", (w+i)%7)
				if i%3 == 0 {
					host = fmt.Sprintf("up-%d.example.com", i%5)
				}
				req, _ := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
				if resp, err := tr.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	snapshots := 0
	for running := true; running; snapshots++ {
		select {
		case <-done:
			running = false
		default:
		}
		stats := tr.Stats()
		for i, s := range stats {
			if i > 0 {
				require.Less(t, stats[i-1].Host, s.Host, "sorted by host, each once")
			}
			require.True(t, s.Budget != nil)
			require.True(t, s.Breaker != nil)
			require.GreaterOrEqual(t, s.Budget.Available, 0.0)
			require.LessOrEqual(t, s.Budget.Available, s.Budget.Capacity)
			require.GreaterOrEqual(t, s.Attempts, int64(0))
			require.GreaterOrEqual(t, s.Retries, int64(0))
		}
	}
	stats := tr.Stats()
	assert.Len(t, stats, 7, "the seven failing hosts, not the succeeding ones")
	t.Logf("%d snapshots taken during the traffic", snapshots)
}

// TestStatsCountRefusals: the snapshot says how often the budget and the
// breaker said no.
func TestStatsCountRefusals(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretry.Transport{Base: hostsBase, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0),
			NewBudget: func(string) httpretry.Budget {
				return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
			},
		}}
		// The first call drains the bucket with two retries and is refused
		// its third; the next two are refused their first retry.
		for range 3 {
			sendTo(t, tr, "down-budget.example.com")
		}
		stats := tr.Stats()
		require.Len(t, stats, 1)
		assert.Equal(t, int64(3), stats[0].Budget.Refusals)
		assert.Equal(t, int64(5), stats[0].Attempts)
		assert.Equal(t, int64(2), stats[0].Retries)
		assert.Zero(t, stats[0].Budget.Available)

		tr = &httpretry.Transport{Base: hostsBase, Policy: httpretry.Policy{
			Backoff:   backoff.Constant(0),
			NewBudget: httpretry.NoBudget,
			Breaker:   httpretry.BreakerPolicy{ConsecutiveFailures: 3, OpenFor: time.Minute},
		}}
		// The breaker opens on the first call's third attempt, which is
		// then refused its retry; the next two calls send nothing.
		for range 3 {
			req, _ := http.NewRequest(http.MethodGet, "https://down-breaker.example.com/", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		stats = tr.Stats()
		require.Len(t, stats, 1)
		assert.Equal(t, httpretry.BreakerOpen, stats[0].Breaker.State)
		assert.Equal(t, int64(3), stats[0].Breaker.Refusals)
		assert.Equal(t, int64(3), stats[0].Attempts)
		assert.Nil(t, stats[0].Budget)
	})
}

// TestStatsAllocatesOnlyItsSlice: two allocations per call, the slice and
// the sections its hosts point into.
func TestStatsAllocatesOnlyItsSlice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretry.Transport{Base: hostsBase, Policy: httpretry.Policy{
			MaxAttempts: 1,
			Breaker:     httpretry.BreakerPolicy{ConsecutiveFailures: 5},
		}}
		for i := range 100 {
			sendTo(t, tr, fmt.Sprintf("down-%d.example.com", i))
		}
		require.Len(t, tr.Stats(), 100)
		assert.Equal(t, 2.0, testing.AllocsPerRun(100, func() { tr.Stats() }))
	})
}

// BenchmarkStats takes a snapshot of a full table: 10,000 hosts with a
// budget and a breaker each, the most a Transport keeps. Besides B/op and
// allocs/op (a whole snapshot), it reports B/host and ns/host, the cost of
// one host's entry. docs/observability.md quotes it:
//
//	go test -run '^$' -bench '^BenchmarkStats$' -benchmem -count 5 .
func BenchmarkStats(b *testing.B) {
	const hosts = 10_000
	tr := &httpretry.Transport{Base: hostsBase, Policy: httpretry.Policy{
		MaxAttempts: 1,
		Breaker:     httpretry.BreakerPolicy{ConsecutiveFailures: 5},
	}}
	for i := range hosts {
		sendTo(b, tr, fmt.Sprintf("down-%d.example.com", i))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := len(tr.Stats())
	runtime.ReadMemStats(&after)
	if n != hosts {
		b.Fatalf("%d hosts with state, want %d", n, hosts)
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.Stats()
	}
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/hosts, "B/host")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/hosts, "ns/host")
}

// With NoBudget and no breaker, overload control or hedging, a host's
// failures leave nothing to keep: Stats lists no host, as docs/policy.md
// says; with a budget, the same failures give the host state.
func TestStatsListsNoHostWithNothingToKeep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		down := httpretrytest.NewScript(httpretrytest.Status(503))
		lean := &httpretry.Transport{Base: down, Policy: httpretry.Policy{Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}}
		budgeted := &httpretry.Transport{Base: down, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		for _, tr := range []*httpretry.Transport{lean, budgeted} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://api.example.com/", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		}
		assert.Empty(t, lean.Stats(), "NoBudget and nothing else: no state")
		assert.Len(t, budgeted.Stats(), 1, "a budget to keep: state at the first failure")
	})
}
