package bench

// Defaults and policy features of httpretry, go-retryablehttp v0.7.8 and
// failsafe-go v0.9.8's failsafehttp, observed against loopback servers:
// attempts and backoff out of the box, retry budgets, an open breaker,
// hedging, per-host policies, per-attempt timeouts and waits that would
// outlast the caller's deadline. docs/comparison.md puts them next to the
// AWS SDK's (compare_aws_test.go) and grpc-go's (compare_grpc_test.go).
// Waits are zero or microseconds, except the 20 ms attempt timeouts.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func zeroBackoff(time.Duration, time.Duration, int, *http.Response) time.Duration { return 0 }

// TestCompareDefaultAttempts: attempts against a server that always
// answers 503, each library configured only to not wait. httpretry: 4;
// go-retryablehttp: 5 (RetryMax 4); failsafehttp: 3 (2 retries).
func TestCompareDefaultAttempts(t *testing.T) {
	rts := map[string]func(base http.RoundTripper) http.RoundTripper{
		"httpretry": func(base http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		},
		"retryablehttp": func(base http.RoundTripper) http.RoundTripper {
			c := retryablehttp.NewClient()
			c.HTTPClient.Transport = base
			c.Logger, c.Backoff = nil, zeroBackoff
			return &retryablehttp.RoundTripper{Client: c}
		},
		"failsafehttp": func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())
		},
	}
	attempts := map[string]int{"httpretry": 4, "retryablehttp": 5, "failsafehttp": 3}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 503)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := rts[lib.name](newBare()).RoundTrip(req)
			if err == nil {
				closeResp(resp)
			}
			assert.Equal(t, attempts[lib.name], srv.received())
		})
	}
}

// TestCompareBackoffShape records the waits each library schedules before
// its retries (the test's hooks let no wait happen). go-retryablehttp's
// default: 1 s·2^(n−1) capped at 30 s, exactly, without jitter.
// failsafehttp's default: no wait at all; with WithBackoff(10 µs, 40 µs)
// and a jitter factor of 0.5 the jitter is applied after the cap, so waits
// exceed the 40 µs maximum. httpretry's default is measured by
// TestCompareAWSBackoff/httpretry: full jitter, never above its 3 s cap.
func TestCompareBackoffShape(t *testing.T) {
	t.Run("retryablehttp", func(t *testing.T) {
		srv := newScripted(t, 503)
		c := retryablehttp.NewClient()
		c.HTTPClient.Transport = newBare()
		c.Logger, c.RetryMax = nil, 9
		var waits []time.Duration
		c.Backoff = func(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
			waits = append(waits, retryablehttp.DefaultBackoff(lo, hi, n, resp))
			return 0
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		_, err := (&retryablehttp.RoundTripper{Client: c}).RoundTrip(req)
		require.Error(t, err)
		s := time.Second
		assert.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s, 30 * s}, waits)
	})
	t.Run("failsafehttp", func(t *testing.T) {
		run := func(b retrypolicy.Builder[*http.Response]) []time.Duration {
			srv := newScripted(t, 503)
			var waits []time.Duration
			p := b.OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) {
				waits = append(waits, e.Delay)
			}).Build()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := failsafehttp.NewRoundTripper(newBare(), p).RoundTrip(req)
			if err == nil {
				closeResp(resp)
			}
			return waits
		}
		assert.Equal(t, []time.Duration{0, 0}, run(failsafehttp.NewRetryPolicyBuilder()), "the default: no wait")

		const maxDelay = 40 * time.Microsecond
		var waits []time.Duration
		for range 5 {
			waits = append(waits, run(failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(12).
				WithBackoff(10*time.Microsecond, maxDelay).WithJitterFactor(0.5))...)
		}
		hi := waits[0]
		for _, w := range waits {
			hi = max(hi, w)
		}
		t.Logf("WithBackoff(10µs, %v), jitter factor 0.5: longest scheduled wait %v", maxDelay, hi)
		assert.Greater(t, hi, maxDelay, "jitter after the cap: waits above the maximum")
		assert.LessOrEqual(t, hi, maxDelay*3/2)
	})
}

// TestCompareDefaultBudget: 40 calls to a host that only answers 503,
// each library with 4 attempts and waits of zero, nothing else configured.
// httpretry's default token bucket pays for 100 retries (33 calls get 4
// attempts, the 34th 2), then every call gets 1: 140 attempts. The others
// have no budget by default: 160.
func TestCompareDefaultBudget(t *testing.T) {
	total := map[string]int{"httpretry": 33*4 + 2 + 6, "retryablehttp": 160, "failsafehttp": 160}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 503)
			rt := lib.new(newBare(), 0)
			var stops []httpretry.StopReason
			if h, ok := rt.(*httpretry.Transport); ok {
				h.OnAttempt = func(a httpretry.Attempt) { stops = append(stops, a.Stop) }
			}
			for range 40 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				resp, err := rt.RoundTrip(req)
				if err == nil {
					closeResp(resp)
				}
			}
			assert.Equal(t, total[lib.name], srv.received())
			if lib.name == "httpretry" {
				assert.Equal(t, httpretry.StopBudget, stops[len(stops)-1])
			}
		})
	}
}

// TestCompareBreakerOpen: with a circuit breaker open, httpretry fails the
// call at once with ErrCircuitOpen: no attempt, no retry. failsafehttp's
// retry policy, composed around its own circuit breaker, retries the
// breaker's ErrOpen until its retries run out, without sending anything.
// go-retryablehttp has no breaker.
func TestCompareBreakerOpen(t *testing.T) {
	t.Run("httpretry", func(t *testing.T) {
		srv := newScripted(t, 503)
		var stops []httpretry.StopReason
		rt := &httpretry.Transport{Base: newBare(), Policy: httpretry.Policy{
			MaxAttempts: 1, Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 6},
		}, OnAttempt: func(a httpretry.Attempt) { stops = append(stops, a.Stop) }}
		for range 6 {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			closeResp(resp)
		}
		require.Equal(t, 6, srv.received())
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, httpretry.ErrCircuitOpen)
		assert.Equal(t, 6, srv.received(), "nothing sent")
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopBreaker, re.Stop)
		assert.Zero(t, re.Attempts)
		assert.Len(t, stops, 6, "no attempt, so no OnAttempt call")
	})
	t.Run("failsafehttp", func(t *testing.T) {
		srv := newScripted(t, 200)
		cb := circuitbreaker.NewWithDefaults[*http.Response]()
		cb.Open()
		var retries atomic.Int32
		rp := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).
			OnRetry(func(failsafe.ExecutionEvent[*http.Response]) { retries.Add(1) }).Build()
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := failsafehttp.NewRoundTripper(newBare(), rp, cb).RoundTrip(req)
		assert.Nil(t, resp)
		var ee retrypolicy.ExceededError
		require.ErrorAs(t, err, &ee)
		assert.ErrorIs(t, ee.LastError, circuitbreaker.ErrOpen)
		assert.Equal(t, int32(3), retries.Load(), "the open breaker is retried")
		assert.Zero(t, srv.received(), "nothing sent")
	})
}

// slowFirst is a server whose first request waits until a second one
// arrives (or its own request is cancelled), then both answer 200.
func slowFirst(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	second := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			select {
			case <-second:
			case <-r.Context().Done():
			}
		case 2:
			close(second)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestCompareHedging: a GET whose first attempt does not answer. httpretry
// (Hedge.Delay 5 ms) and failsafehttp (hedgepolicy.NewWithDelay(5 ms))
// send a second attempt alongside it, which answers. go-retryablehttp has
// no hedging.
func TestCompareHedging(t *testing.T) {
	rts := map[string]func() http.RoundTripper{
		"httpretry": func() http.RoundTripper {
			return &httpretry.Transport{Base: newBare(), Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: 5 * time.Millisecond}}}
		},
		"failsafehttp": func() http.RoundTripper {
			return failsafehttp.NewRoundTripper(newBare(), hedgepolicy.NewWithDelay[*http.Response](5*time.Millisecond))
		},
	}
	for _, name := range []string{"httpretry", "failsafehttp"} {
		t.Run(name, func(t *testing.T) {
			srv, n := slowFirst(t)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := rts[name]().RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			closeResp(resp)
			assert.Equal(t, int32(2), n.Load(), "attempts")
		})
	}
}

// TestComparePerHostPolicy: one httpretry Transport, two hosts, one of
// them named in Hosts with MaxAttempts 1. Neither go-retryablehttp nor
// failsafehttp has policies per host: one client has one policy.
func TestComparePerHostPolicy(t *testing.T) {
	a, b := newScripted(t, 503), newScripted(t, 503)
	ua, _ := url.Parse(a.URL)
	rt := &httpretry.Transport{
		Base:   newBare(),
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
		Hosts:  map[string]httpretry.Policy{ua.Host: {MaxAttempts: 1}},
	}
	for _, srv := range []*scripted{a, b} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		closeResp(resp)
	}
	assert.Equal(t, 1, a.received(), "the host with its own policy")
	assert.Equal(t, 4, b.received(), "the default policy")
}

// TestComparePerAttemptTimeout: the first attempt never answers; each
// library is given a 20 ms limit per attempt (httpretry AttemptTimeout;
// go-retryablehttp the Timeout of its http.Client, which bounds each
// attempt; failsafehttp a timeout policy inside its retry policy). Each
// cuts the attempt, retries, and returns the second attempt's 200.
func TestComparePerAttemptTimeout(t *testing.T) {
	const limit = 20 * time.Millisecond
	rts := map[string]func() http.RoundTripper{
		"httpretry": func() http.RoundTripper {
			return &httpretry.Transport{Base: newBare(), Policy: httpretry.Policy{AttemptTimeout: limit, Backoff: backoff.Constant(0)}}
		},
		"retryablehttp": func() http.RoundTripper {
			rt := newRetryableHTTP(newBare(), 0).(*retryablehttp.RoundTripper)
			rt.Client.HTTPClient.Timeout = limit
			return rt
		},
		"failsafehttp": func() http.RoundTripper {
			return failsafehttp.NewRoundTripper(newBare(), failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).Build(),
				timeout.New[*http.Response](limit))
		},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					<-r.Context().Done() // until the client gives up on it
				}
			}))
			t.Cleanup(srv.Close)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := rts[lib.name]().RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			closeResp(resp)
			assert.Equal(t, int32(2), n.Load(), "attempts")
		})
	}
}

// TestCompareDeadlineAwareWait: a 503 asks for Retry-After: 10 and the
// caller's context has 1 s left. httpretry does not start a wait that
// would end after the deadline: it returns the 503 at once (StopDeadline).
// go-retryablehttp and failsafehttp schedule the 10 s wait regardless; the
// test sees it in their hooks and cancels the context instead of waiting,
// so they end with context.Canceled rather than the 503.
func TestCompareDeadlineAwareWait(t *testing.T) {
	type seen struct {
		wait, left time.Duration
		resp       *http.Response
		err        error
		stop       httpretry.StopReason
	}
	run := map[string]func(ctx context.Context, cancel context.CancelFunc, url string) seen{
		"httpretry": func(ctx context.Context, _ context.CancelFunc, url string) seen {
			var s seen
			rt := &httpretry.Transport{Base: newBare(), OnAttempt: func(a httpretry.Attempt) { s.stop = a.Stop }}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			s.resp, s.err = rt.RoundTrip(req)
			return s
		},
		"retryablehttp": func(ctx context.Context, cancel context.CancelFunc, url string) seen {
			var s seen
			rt := newRetryableHTTP(newBare(), time.Second).(*retryablehttp.RoundTripper)
			rt.Client.Backoff = func(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
				s.wait = retryablehttp.DefaultBackoff(lo, hi, n, resp)
				deadline, _ := ctx.Deadline()
				s.left = time.Until(deadline)
				cancel()
				return s.wait
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			s.resp, s.err = rt.RoundTrip(req)
			return s
		},
		"failsafehttp": func(ctx context.Context, cancel context.CancelFunc, url string) seen {
			var s seen
			p := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBackoff(time.Second, 30*time.Second).
				OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) {
					s.wait = e.Delay
					deadline, _ := ctx.Deadline()
					s.left = time.Until(deadline)
					cancel()
				}).Build()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			s.resp, s.err = failsafehttp.NewRoundTripper(newBare(), p).RoundTrip(req)
			return s
		},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 503, 200)
			srv.header.Set("Retry-After", "10")
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			s := run[lib.name](ctx, cancel, srv.URL)
			defer closeResp(s.resp)
			assert.Equal(t, 1, srv.received())
			if lib.name == "httpretry" {
				require.NoError(t, s.err)
				assert.Equal(t, 503, s.resp.StatusCode, "returned at once")
				assert.Equal(t, httpretry.StopDeadline, s.stop)
				return
			}
			assert.Equal(t, 10*time.Second, s.wait, "scheduled")
			assert.Less(t, s.left, time.Second, "with less than that to the deadline")
			assert.True(t, errors.Is(s.err, context.Canceled), "%v", s.err)
		})
	}
}
