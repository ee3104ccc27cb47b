package httpretry_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func roundTrip(t *testing.T, tr *httpretry.Transport, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	return resp, err
}

func TestWithoutRetries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Hedge: httpretry.HedgePolicy{Delay: time.Millisecond},
		}}
		resp, err := roundTrip(t, tr, httpretry.WithoutRetries(t.Context()), site)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		httpretrytest.CheckAttempts(t, up.Requests(), 1)

		// The same Transport, without the override, retries.
		_, err = roundTrip(t, tr, t.Context(), site)
		require.NoError(t, err)
		assert.Len(t, up.Requests(), 1+4)
	})
}

func TestWithPolicyEditsThePolicyThatApplies(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.RetryAfter(429, "90"), httpretrytest.Status(200), httpretrytest.RetryAfter(429, "90"))
		tr := &httpretry.Transport{Base: up, Hosts: map[string]httpretry.Policy{
			"api.example.com": {MaxAttempts: 3, MaxRetryAfter: 30 * time.Second},
		}}
		var seen httpretry.Policy
		ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) {
			seen = *p
			p.MaxRetryAfter = 2 * time.Minute // this call may wait longer
		})
		start := time.Now()
		resp, err := roundTrip(t, tr, ctx, site)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.GreaterOrEqual(t, time.Since(start), 90*time.Second, "Retry-After obeyed within the call's ceiling")
		assert.Equal(t, 3, seen.MaxAttempts, "the host's entry, after the Hosts lookup")
		assert.Equal(t, 30*time.Second, seen.MaxRetryAfter)
		assert.NotNil(t, seen.Backoff, "defaults filled in")
		assert.Equal(t, int64(1<<20) /* the default MaxReplayBytes */, seen.MaxReplayBytes)

		// Without the override, the host's 30 s ceiling returns the 429.
		resp, err = roundTrip(t, tr, t.Context(), site)
		require.NoError(t, err)
		assert.Equal(t, 429, resp.StatusCode)
		assert.Len(t, up.Requests(), 3)
	})
}

func TestWithPolicyComposesInOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		var order []int
		ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { order = append(order, 1); p.MaxAttempts = 6 })
		ctx = httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { order = append(order, 2); p.MaxAttempts-- })
		ctx = httpretry.WithPolicy(ctx, nil) // adds nothing
		_, err := roundTrip(t, tr, ctx, site)
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2}, order)
		httpretrytest.CheckAttempts(t, up.Requests(), 5)

		// WithoutRetries after WithPolicy wins, and the other way round.
		up2 := httpretrytest.NewScript(httpretrytest.Status(503))
		tr2 := &httpretry.Transport{Base: up2, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		_, err = roundTrip(t, tr2, httpretry.WithoutRetries(ctx), site)
		require.NoError(t, err)
		httpretrytest.CheckAttempts(t, up2.Requests(), 1)
	})
}

// TestWithPolicySharesPerHostState: an override never creates a budget of
// its own: retries it sends are charged to the host's, and it cannot
// change per-host settings.
func TestWithPolicySharesPerHostState(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		created := 0
		bucket := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 20, RetryCost: 5})
		up := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Backoff:   backoff.Constant(0),
			NewBudget: func(string) httpretry.Budget { created++; return bucket },
		}}
		ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { p.MaxAttempts = 10 })
		_, err := roundTrip(t, tr, ctx, site)
		require.NoError(t, err)
		assert.Equal(t, 1, created)
		assert.Equal(t, 0, tokens(bucket), "the override's retries spent the host's budget")
		httpretrytest.CheckAttempts(t, up.Requests(), 5)

		for _, f := range []func(*httpretry.Policy){
			func(p *httpretry.Policy) { p.NewBudget = httpretry.NoBudget },
			func(p *httpretry.Policy) { p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 1} },
		} {
			_, err := roundTrip(t, tr, httpretry.WithPolicy(t.Context(), f), site)
			assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
			assert.ErrorContains(t, err, "is per host and cannot be changed per request")
		}
		assert.Len(t, up.Requests(), 5, "nothing sent")
	})
}

func TestWithPolicyInvalidEdit(t *testing.T) {
	t.Parallel()
	up := httpretrytest.NewScript(httpretrytest.Status(200))
	tr := &httpretry.Transport{Base: up}
	ctx := httpretry.WithPolicy(context.Background(), func(p *httpretry.Policy) {
		p.MaxAttempts = -1
		p.MaxRetryAfter = -time.Second
	})
	_, err := roundTrip(t, tr, ctx, site)
	assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
	assert.ErrorContains(t, err, "WithPolicy.MaxAttempts: -1 is negative")
	assert.ErrorContains(t, err, "WithPolicy.MaxRetryAfter: -1s is negative")
	assert.Empty(t, up.Requests())
}

// TestWithPolicyZeroPerHostFieldMeansItsDefault: setting NewBudget to nil
// in an edit means the default budget, as it does at the host: no change,
// so no error.
func TestWithPolicyZeroPerHostFieldMeansItsDefault(t *testing.T) {
	t.Parallel()
	up := httpretrytest.NewScript(httpretrytest.Status(200))
	tr := &httpretry.Transport{Base: up}
	_, err := roundTrip(t, tr, httpretry.WithPolicy(context.Background(), func(p *httpretry.Policy) { p.NewBudget = nil }), site)
	assert.NoError(t, err)
}
