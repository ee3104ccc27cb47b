package httpretry_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestServerHints(t *testing.T) {
	t.Parallel()
	const b = 100 * time.Millisecond
	stripe := httpretry.HintPolicy{ShouldRetryHeader: "Stripe-Should-Retry"}
	cases := []struct {
		name     string
		method   string
		first    httpretrytest.Outcome
		hints    httpretry.HintPolicy
		attempts int
		wait     time.Duration // before the second attempt; the lower bound when jittered
		source   string
	}{
		{name: "should-retry true retries a 400, even an unkeyed PATCH", method: "PATCH",
			first: httpretrytest.Status(400).Header("Stripe-Should-Retry", "true"), hints: stripe, attempts: 2, wait: b, source: "backoff"},
		{name: "should-retry false stops a 503", method: "GET",
			first: httpretrytest.Status(503).Header("Stripe-Should-Retry", "false"), hints: stripe, attempts: 1},
		{name: "should-retry garbage is ignored", method: "GET",
			first: httpretrytest.Status(503).Header("Stripe-Should-Retry", "maybe"), hints: stripe, attempts: 2, wait: b, source: "backoff"},
		{name: "should-retry header unset in the policy is not read", method: "GET",
			first: httpretrytest.Status(400).Header("Stripe-Should-Retry", "true"), attempts: 1},
		{name: "RateLimit t on a 429", method: "GET",
			first: httpretrytest.Status(429).Header("RateLimit", `"default";r=0;t=5`), attempts: 2, wait: 5 * time.Second, source: "ratelimit"},
		{name: "RateLimit can be ignored", method: "GET", hints: httpretry.HintPolicy{IgnoreRateLimit: true},
			first: httpretrytest.Status(429).Header("RateLimit", `"default";r=0;t=5`), attempts: 2, wait: b, source: "backoff"},
		{name: "Retry-After beats RateLimit", method: "GET",
			first: httpretrytest.Status(429).Header("RateLimit", `"default";r=0;t=30`).Header("Retry-After", "2"), attempts: 2, wait: 2 * time.Second, source: "retry-after"},
		{name: "RateLimit above MaxRetryAfter returns the response", method: "GET",
			first: httpretrytest.Status(429).Header("RateLimit", `"default";r=0;t=3600`), attempts: 1},
		{name: "RateLimit garbage falls back to backoff", method: "GET",
			first: httpretrytest.Status(429).Header("RateLimit", `"default";r=zero;t=soon`), attempts: 2, wait: b, source: "backoff"},
		{name: "reset header, delta seconds", method: "GET", hints: httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset"},
			first: httpretrytest.Status(429).Header("X-RateLimit-Reset", "3"), attempts: 2, wait: 3 * time.Second, source: "ratelimit"},
		{name: "a hint never makes a success retried", method: "GET",
			first: httpretrytest.Status(200).Header("RateLimit", `"default";r=0;t=5`), attempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(tc.first, httpretrytest.Status(200))
				var sources []string
				tr := &httpretry.Transport{Base: fake,
					Policy:    httpretry.Policy{Backoff: backoff.Constant(b), Hints: tc.hints},
					OnAttempt: func(a httpretry.Attempt) { sources = append(sources, a.DelaySource.String()) }}
				req, _ := http.NewRequestWithContext(t.Context(), tc.method, site, strings.NewReader("x"))
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				seen := fake.Requests()
				require.Len(t, seen, tc.attempts)
				if tc.attempts == 1 {
					return
				}
				wait := seen[1].Time.Sub(start)
				assert.GreaterOrEqual(t, wait, tc.wait)
				assert.LessOrEqual(t, wait, tc.wait+tc.wait/10)
				assert.Equal(t, tc.source, sources[0])
			})
		})
	}
}

func TestResetHeaderEpoch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		reset := strconv.FormatInt(start.Add(20*time.Second).Unix(), 10)
		fake := httpretrytest.NewScript(httpretrytest.Status(503).Header("X-RateLimit-Reset", reset), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			Hints: httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset"},
		}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		wait := fake.Requests()[1].Time.Sub(start)
		assert.GreaterOrEqual(t, wait, 20*time.Second)
		assert.LessOrEqual(t, wait, 22*time.Second)
	})
}

// TestKeyedConflictIsRetried: by the IETF Idempotency-Key draft, a 409
// means the original request with that key is still in flight, and 422
// that the key was reused with another payload. A 409 can mean "in flight"
// only once the key was sent before: to a retry, not to the first attempt
// with a key the Transport added, where it means a real conflict such as
// "already exists" (S3 CreateBucket, Azure CreateContainer).
func TestKeyedConflictIsRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(409), httpretrytest.Status(409), httpretrytest.Status(201))
		tr := &httpretry.Transport{Base: fake}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, site, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 201, resp.StatusCode)

		fake = httpretrytest.NewScript(httpretrytest.Status(409), httpretrytest.Status(201))
		tr = &httpretry.Transport{Base: fake}
		req, _ = http.NewRequestWithContext(t.Context(), http.MethodPut, site, strings.NewReader("x"))
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 409, resp.StatusCode, "the first attempt's conflict is an answer")
		assert.Len(t, fake.Requests(), 1)

		fake = httpretrytest.NewScript(httpretrytest.Status(422))
		tr = &httpretry.Transport{Base: fake}
		req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, site, strings.NewReader("x"))
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, fake.Requests(), 1)
	})
}

// TestShouldRetryHeaderOnASuccess: the should-retry header speaks about
// failures. On a 2xx it is ignored: a successful unkeyed POST is never sent
// again because the server said "true", and "false" does not turn a
// success into a failure.
func TestShouldRetryHeaderOnASuccess(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"true", "false"} {
		up := httpretrytest.NewScript(httpretrytest.Status(200).Header("Stripe-Should-Retry", v))
		var calls []httpretry.Call
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0),
			Keys:    httpretry.KeyPolicy{Disabled: true},
			Hints:   httpretry.HintPolicy{ShouldRetryHeader: "Stripe-Should-Retry"},
		}, OnCall: func(c httpretry.Call) { calls = append(calls, c) }}
		req, _ := http.NewRequest(http.MethodPost, site, strings.NewReader("amount=100"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, up.Requests(), 1, "Should-Retry: %s on a 200", v)
		assert.Equal(t, httpretry.StopSuccess, calls[0].Stop)
	}
}
