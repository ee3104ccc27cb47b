package httpretry_test

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

// TestBudgetThroughTransport drives a total outage through the public API:
// the default bucket allows 100 retries, then each request gets one attempt,
// and the refusal is visible to the observer.
func TestBudgetThroughTransport(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		var refused int
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
			OnAttempt: func(a httpretry.Attempt) {
				if a.Stop == httpretry.StopBudget {
					refused++
				}
			}}
		const requests = 200
		for range requests {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err, "the failure itself is returned")
			resp.Body.Close()
		}
		assert.Len(t, fake.Requests(), requests+100, "100 retries, then none")
		// 33 requests take 3 retries each (495 tokens), the 34th takes the
		// last one and is refused its second; the 166 after it are refused
		// their first.
		assert.Equal(t, 1+166, refused)
	})
}

// TestBudgetRefillsThroughTransport: after an outage, five clean successes
// pay for one retry again.
func TestBudgetRefillsThroughTransport(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// The host is down until the test ends the outage, and after it
		// starts it again: every request that reaches it fails.
		var failed atomic.Int32
		outage := &chaos.Transport{
			Next:     httpretrytest.NewScript(httpretrytest.Status(200)),
			Rules:    []chaos.Rule{{Rate: 1, Fault: chaos.Status(503)}},
			OnInject: func(*http.Request, *chaos.Rule) { failed.Add(1) },
		}
		bucket := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})
		tr := &httpretry.Transport{Base: outage, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0), NewBudget: func(string) httpretry.Budget { return bucket },
		}}
		send := func() {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		for tokens(bucket) > 0 {
			send()
		}
		outage.SetEnabled(false)
		for range 5 {
			send()
		}
		assert.Equal(t, 5, tokens(bucket))
		before := failed.Load()
		outage.SetEnabled(true)
		send()
		assert.EqualValues(t, 2, failed.Load()-before, "one retry, paid for by five successes")
		assert.Equal(t, 0, tokens(bucket))
	})
}

func TestBudgetIsPerHost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		down := map[string]bool{"down.example.com": true}
		var attempts = map[string]int{}
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			attempts[req.URL.Host]++
			code := 200
			if down[req.URL.Host] {
				code = 503
			}
			return &http.Response{StatusCode: code, Body: http.NoBody}, nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		send := func(host string) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/", nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		for range 100 {
			send("down.example.com") // spends the down host's whole budget
		}
		// The healthy host's budget is untouched: when it fails, it retries.
		down["up.example.com"] = true
		send("up.example.com")
		assert.Equal(t, 4, attempts["up.example.com"])
	})
}

func TestBudgetKeyFoldsTheDefaultPort(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var created []string
		tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)), Policy: httpretry.Policy{
			MaxAttempts: 1,
			NewBudget: func(host string) httpretry.Budget {
				created = append(created, host)
				return httpretry.DefaultBudget(host)
			},
		}}
		for _, u := range []string{"https://api.example.com/", "https://API.example.com:443/", "https://api.example.com:8443/", "http://api.example.com:80/", "http://api.example.com/"} {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, []string{"api.example.com:443", "api.example.com:8443", "api.example.com:80"}, created,
			"one budget per host and port, the default port filled in")
	})
}

// TestNoStateForHealthyHosts: a host that has only succeeded holds no
// per-host state; its first failure creates it.
func TestNoStateForHealthyHosts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		created := 0
		// The host succeeds until the test starts an outage.
		outage := &chaos.Transport{
			Next:  httpretrytest.NewScript(httpretrytest.Status(200)),
			Rules: []chaos.Rule{{Rate: 1, Fault: chaos.Status(503)}},
		}
		outage.SetEnabled(false)
		tr := &httpretry.Transport{Base: outage, Policy: httpretry.Policy{
			Backoff:   backoff.Constant(0),
			NewBudget: func(host string) httpretry.Budget { created++; return httpretry.DefaultBudget(host) },
			Breaker:   httpretry.BreakerPolicy{ConsecutiveFailures: 5},
		}}
		for range 100 {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Zero(t, created)
		assert.Empty(t, tr.Stats())
		outage.SetEnabled(true)
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, created)
		stats := tr.Stats()
		require.Len(t, stats, 1)
		assert.Equal(t, "api.example.com:443", stats[0].Host)
		assert.Equal(t, int64(4), stats[0].Attempts)
		assert.Equal(t, int64(3), stats[0].Retries)
		assert.Equal(t, httpretry.ClassTransient, stats[0].LastFailure)
		assert.Equal(t, float64(485), stats[0].Budget.Available, "three retries at 5 tokens")
		assert.Equal(t, float64(500), stats[0].Budget.Capacity)
		assert.Equal(t, uint32(4), stats[0].Breaker.ConsecutiveFailures)
	})
}

func TestNoBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}}
		for range 200 {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Len(t, fake.Requests(), 800, "every request gets all 4 attempts")
	})
}

// TestOnlySentRetriesCost: a retry the caller cancels during its wait is
// never sent, so it costs no tokens: ten such calls leave a ten-token
// bucket full.
func TestOnlySentRetriesCost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bucket := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 1})
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			Backoff:   backoff.Constant(time.Minute),
			NewBudget: func(string) httpretry.Budget { return bucket },
		}}
		for range 10 {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			_, err := tr.RoundTrip(get(t, ctx))
			assert.ErrorIs(t, err, context.Canceled)
		}
		assert.Equal(t, 10, tokens(bucket), "no retry was sent")
		assert.Len(t, fake.Requests(), 10)
	})
}

// countingBudget embeds a token bucket and counts the requests it sees:
// every method is the interface's own, with nothing hidden promoted through
// the embedding.
type countingBudget struct {
	httpretry.Budget
	begins int
}

func (b *countingBudget) Begin() { b.begins++; b.Budget.Begin() }

func TestBudgetEmbeddingTokenBucket(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := &countingBudget{Budget: httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})}
		fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			Backoff:   backoff.Constant(0),
			NewBudget: func(string) httpretry.Budget { return b },
		}}
		for range 3 {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, 3, b.begins, "every request once the host has state")
		assert.Equal(t, 500, tokens(b.Budget), "the retry was refunded on success; successes refill")
	})
}

// TestTokenBucketHugeCredit: a huge credit cannot overflow the bucket
// past its capacity.
func TestTokenBucketHugeCredit(t *testing.T) {
	t.Parallel()
	b := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 10, SuccessCredit: math.MaxInt})
	require.True(t, b.AllowRetry(false))
	b.Succeeded(false, false)
	assert.Equal(t, 10, tokens(b))
	assert.True(t, b.AllowRetry(false))
}
