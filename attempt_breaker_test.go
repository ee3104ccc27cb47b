package httpretry_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// a.test answers 503 to its first three calls, then recovers; b.test
		// answers 200.
		aTest := func(req *http.Request) bool { return req.URL.Host == "a.test" }
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(aTest,
			httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Status(503),
			httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			MaxAttempts: 1,
			NewBudget:   httpretry.NoBudget,
			Breaker:     httpretry.BreakerPolicy{ConsecutiveFailures: 3, OpenFor: 30 * time.Second},
		}}
		breaker := func(host string) httpretry.BreakerState {
			for _, s := range tr.Stats() {
				if s.Host == host {
					require.True(t, s.Breaker != nil)
					return s.Breaker.State
				}
			}
			return httpretry.BreakerClosed
		}
		send := func(host string) (*http.Response, error) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/", nil)
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			return resp, err
		}

		for range 3 {
			resp, err := send("a.test")
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
		}
		// Open: fail fast, without calling Base.
		_, err := send("a.test")
		assert.ErrorIs(t, err, httpretry.ErrCircuitOpen)
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopBreaker, re.Stop)
		assert.Zero(t, re.Attempts)
		assert.Len(t, base.Requests(), 3, "all to a.test")
		assert.Equal(t, httpretry.BreakerOpen, breaker("a.test:443"))

		// Another host has its own breaker.
		resp, err := send("b.test")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)

		// After the timeout it half-opens; a success closes it.
		time.Sleep(31 * time.Second)
		assert.Equal(t, httpretry.BreakerHalfOpen, breaker("a.test:443"))
		resp, err = send("a.test") // a.test has recovered
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, httpretry.BreakerClosed, breaker("a.test:443"))
	})
}

func TestBreakerOpenDuringRetriesKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			Backoff: backoff.Constant(time.Second),
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 2},
		}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err, "the breaker opening mid-call returns the response in hand")
		defer resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, fake.Requests(), 2)
		assert.Equal(t, time.Second, time.Since(start), "no wait after the breaker opened")
	})
}

func TestBreakerIgnoresCallerCancellation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		block := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Hour)) // cut by the caller's context
		tr := &httpretry.Transport{Base: block, Policy: httpretry.Policy{
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 1},
		}}
		for range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			_, err := tr.RoundTrip(get(t, ctx))
			cancel()
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, httpretry.ErrCircuitOpen, "the caller's own deadline is not the host's failure")
		}
	})
}

func TestInnerBreakerIsTerminal(t *testing.T) {
	t.Parallel()
	for _, inner := range []error{httpretry.ErrCircuitOpen, gobreaker.ErrOpenState, fmt.Errorf("sdk: %w", gobreaker.ErrTooManyRequests)} {
		fake := httpretrytest.NewScript(httpretrytest.Fail(inner))
		tr := &httpretry.Transport{Base: fake}
		_, err := tr.RoundTrip(get(t, context.Background()))
		assert.ErrorIs(t, err, inner)
		assert.Len(t, fake.Requests(), 1, "no retry, no wait, no budget charge")
	}
}

// TestBreakerOpensDuringTheWait: when other calls open the host's breaker
// while this call waits to retry, the retry is refused and the 503 already
// in hand is returned, readable, rather than "circuit breaker open".
func TestBreakerOpensDuringTheWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Respond(503, "try later"))
		var (
			mu    sync.Mutex
			calls []httpretry.Call
		)
		tr := &httpretry.Transport{Base: fake,
			Policy: httpretry.Policy{
				Backoff: backoff.Constant(time.Second),
				Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 3},
			},
			OnCall: func(c httpretry.Call) { mu.Lock(); calls = append(calls, c); mu.Unlock() },
		}
		done := make(chan *http.Response)
		go func() {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			assert.NoError(t, err)
			done <- resp
		}()
		time.Sleep(500 * time.Millisecond) // the first call is waiting to retry
		for range 2 {
			resp, err := tr.RoundTrip(get(t, httpretry.WithoutRetries(t.Context())))
			require.NoError(t, err)
			resp.Body.Close()
		}
		resp := <-done
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "try later", readAll(t, resp.Body), "the response in hand, whole")
		resp.Body.Close()
		assert.Len(t, fake.Requests(), 3, "the retry was refused")
		require.Len(t, calls, 3)
		assert.Equal(t, httpretry.StopBreaker, calls[2].Stop)
		assert.Equal(t, 1, calls[2].Attempts)
	})
}
