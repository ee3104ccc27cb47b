package httpretry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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

func TestClassificationOfStatuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code     int
		attempts int
	}{
		{200, 1}, {204, 1}, {301, 1},
		{400, 1}, {401, 1}, {403, 1}, {404, 1}, {409, 1}, {422, 1},
		{408, 4}, {425, 4}, {429, 4},
		{500, 4}, {502, 4}, {503, 4}, {504, 4},
		{501, 1}, {505, 1}, {507, 1},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(httpretrytest.Status(tc.code))
				tr := &httpretry.Transport{Base: fake}
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				assert.Equal(t, tc.code, resp.StatusCode)
				assert.Len(t, fake.Requests(), tc.attempts)
				assert.Equal(t, http.StatusText(tc.code), readAll(t, resp.Body), "the last response is returned unread")
				httpretrytest.CheckDiscardedClosed(t, fake.Requests())
				resp.Body.Close()
			})
		})
	}
}

func TestRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Fail(syscall.ECONNRESET), httpretrytest.Status(502), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Second)}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		seen := fake.Requests()
		require.Len(t, seen, 4)
		for i, s := range seen {
			assert.Equal(t, i+1, s.Attempt, "attempt number in context")
			assert.Equal(t, time.Duration(i)*time.Second, s.Time.Sub(start), "wait before attempt %d", i+1)
		}
		httpretrytest.CheckDiscardedClosed(t, fake.Requests())
	})
}

func TestExactBackoffSchedule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			MaxAttempts: 5,
			Backoff:     backoff.Exponential{Base: 100 * time.Millisecond, Cap: 300 * time.Millisecond},
		}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		var at []time.Duration
		for _, s := range fake.Requests() {
			at = append(at, s.Time.Sub(start))
		}
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{0, 100 * ms, 300 * ms, 600 * ms, 900 * ms}, at)
	})
}

func TestErrorsWithoutResponse(t *testing.T) {
	t.Parallel()
	t.Run("refused connection is a RetryError reaching the OpError", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Fail(httpretrytest.DialRefused()))
			tr := &httpretry.Transport{Base: fake}
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.Nil(t, resp)
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 4, re.Attempts)
			assert.Equal(t, httpretry.StopAttempts, re.Stop)
			var op *net.OpError
			assert.ErrorAs(t, err, &op)
			assert.Contains(t, err.Error(), "4 attempts")
		})
	})
	t.Run("last status is recorded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Fail(io.ErrUnexpectedEOF))
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{MaxAttempts: 2}}
			_, err := tr.RoundTrip(get(t, t.Context()))
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 503, re.LastStatus)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		})
	})
	t.Run("Base returning both is treated as an error", func(t *testing.T) {
		body := httpretrytest.NewBody("x")
		base := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: body}, errBoom
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 1}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, errBoom)
		assert.Equal(t, 1, body.Closes())
	})
	t.Run("Base returning neither is an error", func(t *testing.T) {
		base := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 1}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		assert.Nil(t, resp)
		assert.Error(t, err)
	})
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	// A failed dial that is not ECONNREFUSED, so that the rule for dials is
	// the one that decides.
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	cases := []struct {
		name     string
		method   string
		err      error
		attempts int
	}{
		{"dial error, GET", "GET", dialErr, 4},
		{"dial error, unkeyed PATCH (never sent)", "PATCH", dialErr, 4},
		{"ECONNREFUSED, PATCH", "PATCH", syscall.ECONNREFUSED, 4},
		{"reset, GET", "GET", syscall.ECONNRESET, 4},
		{"reset, unkeyed PATCH (may have been applied)", "PATCH", syscall.ECONNRESET, 1},
		{"EOF, GET", "GET", io.EOF, 4},
		{"temporary DNS failure", "GET", &net.DNSError{Err: "timeout", IsTimeout: true}, 4},
		{"DNS not found", "GET", &net.DNSError{Err: "no such host", IsNotFound: true}, 1},
		{"canceled by a layer below", "GET", context.Canceled, 1},
		{"breaker open below", "GET", httpretry.ErrCircuitOpen, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(httpretrytest.Fail(tc.err))
				tr := &httpretry.Transport{Base: fake}
				req, err := http.NewRequestWithContext(t.Context(), tc.method, site, strings.NewReader("x"))
				require.NoError(t, err)
				_, err = tr.RoundTrip(req)
				assert.ErrorIs(t, err, tc.err)
				assert.Len(t, fake.Requests(), tc.attempts)
			})
		})
	}
}

func TestCallerClassifier(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(404), httpretrytest.Status(404), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			Classify: func(req *http.Request, resp *http.Response, err error) httpretry.Class {
				if req.Method == http.MethodGet && resp != nil && resp.StatusCode == 404 {
					return httpretry.ClassTransient // eventually consistent reads
				}
				return httpretry.ClassDefault
			},
		}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Len(t, fake.Requests(), 3)
	})
}

func TestContext(t *testing.T) {
	t.Parallel()
	t.Run("cancel during a wait returns at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Status(503))
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Minute)}}
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(10*time.Second, cancel)
			start := time.Now()
			resp, err := tr.RoundTrip(get(t, ctx))
			assert.Nil(t, resp)
			assert.Equal(t, 10*time.Second, time.Since(start))
			assert.ErrorIs(t, err, context.Canceled)
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, httpretry.StopContext, re.Stop)
			assert.Equal(t, 503, re.LastStatus)
			assert.Equal(t, 1, re.Attempts)
			httpretrytest.CheckBodiesClosed(t, fake.Requests())
		})
	})
	t.Run("a wait past the deadline is not started", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Status(503))
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Minute)}}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := tr.RoundTrip(get(t, ctx))
			require.NoError(t, err, "the response in hand is returned")
			defer resp.Body.Close()
			assert.Equal(t, 503, resp.StatusCode)
			assert.Zero(t, time.Since(start))
			assert.Len(t, fake.Requests(), 1)
		})
	})
	t.Run("already canceled sends nothing and closes the body", func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		body := httpretrytest.NewBody("x")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, site, body)
		_, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, fake.Requests())
		assert.Equal(t, 1, body.Closes())
	})
	t.Run("a cause is kept", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			why := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(time.Second, func() { cancel(why) })
			tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)), Policy: httpretry.Policy{Backoff: backoff.Constant(time.Hour)}}
			_, err := tr.RoundTrip(get(t, ctx))
			assert.ErrorIs(t, err, why)
		})
	})
}

func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	t.Run("a hung attempt is cut and retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			hung := httpretrytest.Status(200).After(time.Hour) // cut by the attempt timeout first
			base := httpretrytest.NewScript(hung, hung, httpretrytest.Status(200))
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
				AttemptTimeout: 2 * time.Second, Backoff: backoff.Constant(time.Second),
			}}
			start := time.Now()
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Len(t, base.Requests(), 3)
			assert.Equal(t, 6*time.Second, time.Since(start))
		})
	})
	t.Run("exhausted timeouts report ErrAttemptTimeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Hour)) // cut by the attempt timeout first
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{AttemptTimeout: time.Second, MaxAttempts: 2}}
			_, err := tr.RoundTrip(get(t, t.Context()))
			assert.ErrorIs(t, err, httpretry.ErrAttemptTimeout)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, context.Canceled, "an attempt timeout is not the caller's cancellation")
		})
	})
	t.Run("a slow body streams in full; closing it ends the attempt context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var attemptCtx context.Context
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				attemptCtx = req.Context()
				// A slow server: a chunk a second, on the fake clock.
				body := httpretrytest.NewBody(strings.Repeat("chunk", 5)).Slow(5, time.Second)
				return &http.Response{StatusCode: 200, Body: body}, nil
			})
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{AttemptTimeout: 2 * time.Second}}
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			assert.Equal(t, strings.Repeat("chunk", 5), readAll(t, resp.Body))
			assert.NoError(t, attemptCtx.Err(), "still open until Close")
			resp.Body.Close()
			assert.ErrorIs(t, attemptCtx.Err(), context.Canceled)
		})
	})
}

func TestCloseIdleConnectionsIsForwarded(t *testing.T) {
	t.Parallel()
	base := httpretrytest.NewScript()
	(&httpretry.Transport{Base: base}).CloseIdleConnections()
	assert.Positive(t, base.IdleClosures())
	(&httpretry.Transport{}).CloseIdleConnections() // the default Base
}
