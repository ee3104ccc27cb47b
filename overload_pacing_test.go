package httpretry_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// quota answers 200 with X-RateLimit-Remaining and X-RateLimit-Reset (in
// seconds) as set, and counts requests.
type quota struct {
	mu        sync.Mutex
	remaining int
	reset     int
	sent      []time.Time
}

func (q *quota) RoundTrip(req *http.Request) (*http.Response, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, time.Now())
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
	h.Set("X-RateLimit-Reset", strconv.Itoa(q.reset))
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: req}, nil
}

var paceHints = httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset", RemainingHeader: "X-RateLimit-Remaining"}

// TestPacingWaitsForTheReset: once the host says its quota is spent, the
// next request waits for the reset before it is sent, up to 10 % later,
// within MaxRetryAfter and the caller's deadline; a reset further away is
// refused with ErrRateLimited at once, as is any under PaceFailFast.
func TestPacingWaitsForTheReset(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, o httpretry.OverloadPolicy, maxRetryAfter time.Duration) (*httpretry.Transport, *quota, *observed) {
		q := &quota{remaining: 0, reset: 30}
		tr := &httpretry.Transport{Base: q, Policy: httpretry.Policy{Overload: o, Hints: paceHints, MaxRetryAfter: maxRetryAfter}}
		obs := watch(tr)
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		return tr, q, obs
	}
	pace := httpretry.OverloadPolicy{Pace: true}
	t.Run("waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, q, o := setup(t, pace, 0)
			s := statsOf(t, tr, "api.example.com:443")
			assert.True(t, s.Pacing != nil)
			assert.Equal(t, int64(0), s.Pacing.Remaining)
			assert.Equal(t, 30*time.Second, time.Until(s.Pacing.Until))
			start := time.Now()
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, 30*time.Second)
			assert.LessOrEqual(t, took, 33*time.Second)
			require.Len(t, q.sent, 2)
			assert.Equal(t, q.sent[1], time.Now(), "the wait came before the attempt")
			assert.Len(t, o.attempts, 2)
			assert.Equal(t, map[httpretry.StopReason]int{httpretry.StopSuccess: 2}, o.stops())
		})
	})
	refusedAtOnce := func(t *testing.T, tr *httpretry.Transport, ctx context.Context) {
		start := time.Now()
		_, err := tr.RoundTrip(get(t, ctx))
		requireLocalRefusal(t, err, httpretry.ErrRateLimited, httpretry.StopRateLimited)
		assert.Contains(t, err.Error(), "resets in 30s")
		assert.Equal(t, start, time.Now(), "no wait")
		assert.Equal(t, int64(1), statsOf(t, tr, "api.example.com:443").Pacing.Refusals)
	}
	t.Run("the reset is past the caller's deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, q, o := setup(t, pace, 0)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			refusedAtOnce(t, tr, ctx)
			assert.Len(t, q.sent, 1)
			assert.Len(t, o.attempts, 1)
			assert.Equal(t, httpretry.StopRateLimited, o.calls[1].Stop)
			assert.Len(t, o.lines("stop=\"rate limit spent\""), 1)
		})
	})
	t.Run("the reset is past MaxRetryAfter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, _, _ := setup(t, pace, 10*time.Second)
			refusedAtOnce(t, tr, t.Context())
		})
	})
	t.Run("fail fast", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, _, _ := setup(t, httpretry.OverloadPolicy{Pace: true, PaceFailFast: true}, 0)
			refusedAtOnce(t, tr, t.Context())
		})
	})
	t.Run("the caller cancels the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, q, o := setup(t, pace, 0)
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(5*time.Second, cancel)
			_, err := tr.RoundTrip(get(t, ctx))
			require.ErrorIs(t, err, context.Canceled)
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, httpretry.StopContext, re.Stop)
			assert.Zero(t, re.Attempts)
			assert.Len(t, q.sent, 1)
			assert.Equal(t, httpretry.StopContext, o.calls[1].Stop)
		})
	})
	t.Run("requests left are sent at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := &quota{remaining: 3, reset: 30}
			tr := &httpretry.Transport{Base: q, Policy: httpretry.Policy{Overload: pace, Hints: paceHints}}
			for range 3 {
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
			}
			assert.Equal(t, q.sent[0], q.sent[2], "no wait while the quota lasts")
		})
	})
}

// TestPacingByRetryAfterAndRateLimit: a 429's Retry-After paces the host's
// later requests; so does the RateLimit field, with its remaining count.
func TestPacingByRetryAfterAndRateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		first  httpretrytest.Outcome
		paused time.Duration
	}{
		{"429 with Retry-After", httpretrytest.RetryAfter(429, "5"), 5 * time.Second},
		{"RateLimit, nothing left", httpretrytest.Status(200).Header("RateLimit", `"default";r=0;t=7`), 7 * time.Second},
		{"RateLimit, some left", httpretrytest.Status(200).Header("RateLimit", `"default";r=4;t=7`), 0},
		{"a 503's Retry-After is not a quota", httpretrytest.RetryAfter(503, "5"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(tc.first, httpretrytest.Status(200))
				tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{Pace: true}}}
				resp, err := tr.RoundTrip(get(t, httpretry.WithoutRetries(t.Context())))
				require.NoError(t, err)
				resp.Body.Close()
				start := time.Now()
				resp, err = tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
				waited := time.Since(start)
				assert.GreaterOrEqual(t, waited, tc.paused)
				assert.LessOrEqual(t, waited, tc.paused+tc.paused/10)
			})
		})
	}
}

// TestPacingProbesAnAbsurdReset: a single answer announcing a reset far
// away (a hostile or broken RateLimit field: 2^32 s) is believed for a day
// at most, and, like every pause longer than the caller would wait, is
// re-checked: once a minute one request goes through as a probe, and an
// answer that no longer announces the limit ends the pause. One header
// never shuts a host off for as long as the process lives.
func TestPacingProbesAnAbsurdReset(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(
			httpretrytest.Status(200).Header("RateLimit", `"q";r=0;t=4294967296`),
			httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Overload: httpretry.OverloadPolicy{Pace: true, PaceFailFast: true},
		}}
		call := func() error {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		require.NoError(t, call())
		require.ErrorIs(t, call(), httpretry.ErrRateLimited, "the pause holds")
		require.Len(t, tr.Stats(), 1)
		assert.WithinDuration(t, time.Now().Add(24*time.Hour), tr.Stats()[0].Pacing.Until, time.Second, "believed for a day at most")
		time.Sleep(time.Minute)
		require.NoError(t, call(), "a minute on, a probe goes through")
		require.NoError(t, call(), "its answer announced nothing: the pause is over")
		assert.Len(t, up.Requests(), 3)
	})
}

// bucket is an API whose account has a token-bucket quota: rate a second,
// burst at once, 429 with Retry-After: 1 past it (the shortest wait
// delay-seconds can say, while the next token is 1/rate away).
type bucket struct {
	mu       sync.Mutex
	rate     float64
	burst    float64
	tokens   float64
	at       time.Time
	ok, over int
}

func (b *bucket) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.at.IsZero() {
		b.tokens = b.burst
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	b.at = now
	if b.tokens < 1 {
		b.over++
		return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: req}, nil
	}
	b.tokens--
	b.ok++
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// load sends rate calls a second through rt for d, each bounded by 5 s,
// and waits for them.
func load(t *testing.T, rt http.RoundTripper, url string, rate float64, d time.Duration) {
	var wg sync.WaitGroup
	for at := time.Duration(0); at < d; at += time.Duration(float64(time.Second) / rate) {
		time.Sleep(time.Duration(float64(time.Second) / rate))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if resp, err := rt.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// Pacing over a token-bucket quota delivers the quota. A caller wanting
// 150 calls a second against 100 gets about 100, with few 429s; with the
// quota declared, none. (Each 429's Retry-After: 1 held every call for a
// second and released them together, to take the burst and earn another
// second: about 10 a second.)
func TestPacingOverATokenBucketDeliversTheQuota(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		o      httpretry.OverloadPolicy
		max429 float64
	}{
		{"learnt", httpretry.OverloadPolicy{Pace: true}, 0.05},
		{"declared", httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: 100, Burst: 10}}, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &bucket{rate: 100, burst: 10}
				tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{Overload: tc.o}}
				load(t, tr, "https://api.test/", 150, 20*time.Second)
				assert.GreaterOrEqual(t, up.ok, 1900, "the host accepted %d in 20 s: want at least 95 a second", up.ok)
				assert.LessOrEqual(t, float64(up.over), tc.max429*float64(up.ok+up.over), "%d 429s of %d", up.over, up.ok+up.over)
				require.Len(t, tr.Stats(), 1)
				assert.Positive(t, tr.Stats()[0].Pacing.Rate, "Stats shows the rate")
			})
		})
	}
}

// Hosts whose quotas name the same Key share one: two host names of one
// account together get the account's rate.
func TestQuotaKeySharesTheRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := &bucket{rate: 50, burst: 5}
		q := httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: 50, Burst: 5, Key: "acct_1"}}
		tr := &httpretry.Transport{Base: up, Hosts: map[string]httpretry.Policy{
			"api.test": {Overload: q}, "files.test": {Overload: q}}}
		var wg sync.WaitGroup
		wg.Go(func() { load(t, tr, "https://api.test/", 40, 5*time.Second) })
		wg.Go(func() { load(t, tr, "https://files.test/", 40, 5*time.Second) })
		wg.Wait()
		assert.Zero(t, up.over, "the account's quota was passed: %d 429s", up.over)
		assert.GreaterOrEqual(t, up.ok, 240)
	})
}

func TestQuotaValidate(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{
		Quota: httpretry.Quota{Limit: 10, Burst: 11, Per: -time.Second}}},
		Hosts: map[string]httpretry.Policy{"a.test": {Overload: httpretry.OverloadPolicy{Quota: httpretry.Quota{Burst: 3, Key: "x\n"}}}}}
	err := tr.Validate()
	require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
	for _, want := range []string{
		"Policy.Overload.Quota.Burst: 11 is above Limit (10)",
		"Policy.Overload.Quota.Per: -1s is negative",
		`Hosts["a.test"].Overload.Quota.Limit: is 0`,
		`Hosts["a.test"].Overload.Quota.Key: "x\n" has control characters`,
	} {
		assert.ErrorContains(t, err, want)
	}
}
