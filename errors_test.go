package httpretry_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// listError is an error whose dynamic type cannot be compared with ==.
type listError []string

func (e listError) Error() string { return "stopped: " + e[0] }

// TestUncomparableCancelCause: net/http returns context.Cause(ctx), so an
// uncomparable cancel cause becomes both the last attempt's error and the
// cause that ended retrying. Nothing may panic, errors.Is must report the
// cancellation, and errors.As must still reach the cause.
func TestUncomparableCancelCause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cause := listError{"shutting down"}
		base := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Hour)) // cut by the cancellation first
		for _, stage := range []string{"during an attempt", "during a wait"} {
			ctx, cancel := context.WithCancelCause(t.Context())
			rt := http.RoundTripper(base)
			if stage == "during a wait" {
				rt = httpretrytest.NewScript(httpretrytest.Status(503))
			}
			tr := &httpretry.Transport{Base: rt, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Minute)}}
			time.AfterFunc(time.Second, func() { cancel(cause) })
			_, err := tr.RoundTrip(get(t, ctx))
			require.Error(t, err)
			assert.NotPanics(t, func() { _ = err.Error() })
			assert.ErrorIs(t, err, context.Canceled, stage)
			var got listError
			require.ErrorAs(t, err, &got, stage)
			assert.Equal(t, cause[0], got[0])
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, httpretry.StopContext, re.Stop, stage)
			assert.Contains(t, err.Error(), "stopped: shutting down")
		}
	})
}

// TestRefusedRetryAfterTheContextEnded: a retry refused (here by
// PrepareRetry; an open breaker refuses the same way) once the caller's
// context has ended yields an error that errors.Is reports as the
// context's end, as every other RetryError does.
func TestRefusedRetryAfterTheContextEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Fail(syscall.ECONNRESET)), Policy: httpretry.Policy{
		Backoff: backoff.Constant(0),
		PrepareRetry: func(httpretry.Attempt, *http.Request) error {
			cancel() // the caller gives up while the retry is prepared
			return errBoom
		},
	}}
	_, err := tr.RoundTrip(get(t, ctx))
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, httpretry.StopRefused, re.Stop)
	assert.ErrorIs(t, err, errBoom)
	assert.ErrorIs(t, err, context.Canceled, "the caller's context ended before RoundTrip returned")
}

// TestRetryErrorTimeout: code that branches on timeouts behaves as it would
// without the Transport: url.Error.Timeout and os.IsTimeout hold when the
// caller's deadline passed or every attempt timed out.
func TestRetryErrorTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hang := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Hour)) // cut by every deadline below first
		check := func(name string, tr *httpretry.Transport, timeout time.Duration) {
			client := &http.Client{Transport: tr}
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, site, nil)
			_, err := client.Do(req)
			require.Error(t, err, name)
			var ue *url.Error
			require.ErrorAs(t, err, &ue, name)
			assert.True(t, ue.Timeout(), "%s: url.Error.Timeout", name)
			assert.True(t, os.IsTimeout(ue.Err), "%s: os.IsTimeout", name)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
		}
		check("the caller's deadline passes during an attempt", &httpretry.Transport{Base: hang}, time.Second)
		check("every attempt times out", &httpretry.Transport{Base: hang,
			Policy: httpretry.Policy{AttemptTimeout: time.Second, Backoff: backoff.Constant(0)}}, time.Hour)
		check("the next wait would pass the deadline", &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Fail(syscall.ECONNRESET)),
			Policy: httpretry.Policy{Backoff: backoff.Constant(time.Hour)}}, time.Minute)

		// An ordinary failure is not a timeout.
		_, err := (&httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Fail(errors.New("signer: no key")))}).RoundTrip(get(t, t.Context()))
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.False(t, re.Timeout())
	})
}

// TestRetryErrorText: messages read as a sentence, without stutter.
func TestRetryErrorText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  *httpretry.RetryError
		want string
	}{
		{&httpretry.RetryError{Attempts: 4, Stop: httpretry.StopAttempts, Err: errBoom}, "httpretry: 4 attempts failed: boom"},
		{&httpretry.RetryError{Attempts: 1, Stop: httpretry.StopFatal, Err: errBoom}, "httpretry: not retryable after 1 attempt: boom"},
		{&httpretry.RetryError{Attempts: 2, Stop: httpretry.StopBudget, Err: errBoom, Cause: httpretry.ErrBudgetExhausted, LastStatus: 503},
			"httpretry: retry budget exhausted after 2 attempts (last status 503): boom: retry budget exhausted"},
		{&httpretry.RetryError{Stop: httpretry.StopInvalid, Err: httpretry.ErrInvalidRequest}, "httpretry: invalid request"},
		{&httpretry.RetryError{Stop: httpretry.StopBreaker}, "httpretry: circuit breaker open"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.err.Error())
	}
}

// TestNoWaitThatLeavesNoTimeForTheRetry: a wait that ends before the
// deadline but leaves less time than the last attempt took is not started:
// the retry could only run into the deadline and lose the response in
// hand.
func TestNoWaitThatLeavesNoTimeForTheRetry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(503).After(10*time.Millisecond), httpretrytest.Status(200).After(10*time.Millisecond))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{Backoff: backoff.Constant(985 * time.Millisecond)}}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, ctx))
		require.NoError(t, err, "the 503 in hand, not a deadline error after a useless wait")
		assert.Equal(t, 503, resp.StatusCode)
		resp.Body.Close()
		assert.Equal(t, 10*time.Millisecond, time.Since(start))
		assert.Len(t, up.Requests(), 1)
	})
}
