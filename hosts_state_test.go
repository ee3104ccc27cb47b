package httpretry_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func sendTo(t testing.TB, tr *httpretry.Transport, host string) {
	req, _ := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
}

// TestPerHostStateIsBounded: hosts that only succeed hold no state,
// however many there are; hosts that failed hold state up to a bound,
// past which state that protects its host is kept and new hosts go
// without.
func TestPerHostStateIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Hosts whose name starts with "down" answer 503, the others 200.
		// Not a Script: its record of 32,000 requests would double the
		// test's time under -race, and nothing here reads it.
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			code := 200
			if strings.HasPrefix(req.URL.Host, "down") {
				code = 503
			}
			return &http.Response{StatusCode: code, Body: http.NoBody}, nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			MaxAttempts: 1,
			Breaker:     httpretry.BreakerPolicy{ConsecutiveFailures: 5},
		}}
		for i := range 20_000 {
			sendTo(t, tr, fmt.Sprintf("up-%d.example.com", i))
		}
		assert.Empty(t, tr.Stats(), "no state for hosts that only succeeded")

		for i := range 12_000 {
			sendTo(t, tr, fmt.Sprintf("down-%d.example.com", i))
			time.Sleep(time.Millisecond) // an order of use
		}
		stats := tr.Stats()
		assert.Len(t, stats, 10_000, "at most 10,000 hosts keep state")
		seen := map[string]bool{}
		for _, s := range stats {
			seen[s.Host] = true
		}
		// A breaker that counted a failure protects its host: it is never
		// dropped for another host's state, so past the bound the newest
		// hosts go without.
		assert.True(t, seen["down-0.example.com:443"], "the oldest state protects its host and is kept")
		assert.False(t, seen["down-11999.example.com:443"], "past the bound a new host goes without state")
	})
}

// TestIdleStateIsDropped: state at rest is dropped after a minute, and any
// state after ten minutes without a request.
func TestIdleStateIsDropped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var down = map[string]bool{"a.example.com": true, "b.example.com": true}
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			code := 200
			if down[req.URL.Host] {
				code = 503
			}
			return &http.Response{StatusCode: code, Body: http.NoBody}, nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		sendTo(t, tr, "a.example.com") // drains 15 tokens
		sendTo(t, tr, "b.example.com")
		require.Len(t, tr.Stats(), 2)

		// a recovers: 15 successes refill its bucket, so its state is at rest.
		down["a.example.com"] = false
		for range 15 {
			sendTo(t, tr, "a.example.com")
		}
		time.Sleep(2 * time.Minute)
		sendTo(t, tr, "c.example.com") // any new state sweeps the table
		down["c.example.com"] = true
		sendTo(t, tr, "c.example.com")
		hosts := func() []string {
			var h []string
			for _, s := range tr.Stats() {
				h = append(h, s.Host)
			}
			return h
		}
		assert.Equal(t, []string{"b.example.com:443", "c.example.com:443"}, hosts(), "a was at rest: dropped")

		time.Sleep(11 * time.Minute)
		down["d.example.com"] = true
		sendTo(t, tr, "d.example.com")
		assert.Equal(t, []string{"d.example.com:443"}, hosts(), "b and c were idle for ten minutes: dropped")
	})
}

// BenchmarkHostStateMemory sends one request to each of a million distinct
// hosts that answer 200 and reports the heap's growth: hosts that only
// succeed hold no state. Target: at most 8 MiB.
func BenchmarkHostStateMemory(b *testing.B) {
	const hosts = 1_000_000
	names := make([]string, hosts)
	for i := range names {
		names[i] = fmt.Sprintf("host-%d.example.com", i)
	}
	reqs := make([]*http.Request, hosts)
	for i, n := range names {
		reqs[i], _ = http.NewRequest(http.MethodGet, "https://"+n+"/", nil)
	}
	// Every host answers 200. Not a Script, whose record of a million
	// requests would be the heap's growth.
	healthy := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})
	for _, tc := range []struct {
		name   string
		policy httpretry.Policy
	}{
		{"default-budget", httpretry.Policy{}},
		{"no-budget", httpretry.Policy{NewBudget: httpretry.NoBudget}},
		{"breaker", httpretry.Policy{Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var grown float64
			for range b.N {
				tr := &httpretry.Transport{Base: healthy, Policy: tc.policy}
				before := heapInUse()
				for _, req := range reqs {
					resp, err := tr.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
				grown = float64(heapInUse()-before) / (1 << 20)
				runtime.KeepAlive(tr)
			}
			b.ReportMetric(grown, "heap-MiB/1M-hosts")
		})
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestNewBudgetOncePerHost: calls that need their host's state at once
// (their first failures come together, or an overload control wants state
// from the first request) still get one state, and one budget: NewBudget
// is called once per host. (It used to be called by each, and all budgets
// but one thrown away.)
func TestNewBudgetOncePerHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		overload httpretry.OverloadPolicy
		fail     bool // the first attempt of each call gets a 503
	}{
		{"first failures", httpretry.OverloadPolicy{}, true},
		// With an overload control, state is made at the first request;
		// the calls succeed at once, so that the throttle, which may reject
		// locally after failures, leaves the outcome to chance nowhere.
		{"first requests with an overload control", httpretry.OverloadPolicy{Throttle: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			second := make(chan struct{})
			var secondOnce sync.Once
			newBudget := func(string) httpretry.Budget {
				if calls.Add(1) == 1 {
					// Give a second creation the time to overlap this one.
					select {
					case <-second:
					case <-time.After(100 * time.Millisecond):
					}
				} else {
					secondOnce.Do(func() { close(second) })
				}
				return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})
			}
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				code := 200
				if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 && tc.fail {
					code = 503
				}
				return &http.Response{StatusCode: code, Body: http.NoBody}, nil
			})
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
				Backoff: backoff.Constant(0), NewBudget: newBudget, Overload: tc.overload}}
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					resp, err := tr.RoundTrip(get(t, t.Context()))
					if assert.NoError(t, err) {
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			assert.EqualValues(t, 1, calls.Load(), "NewBudget calls for one host")
			require.Len(t, tr.Stats(), 1)
		})
	}
}
