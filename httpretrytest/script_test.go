package httpretrytest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
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

const api = "https://api.example.com"

func newReq(t *testing.T, ctx context.Context, method, path, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, api+path, rd)
	require.NoError(t, err)
	return req
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestScriptSucceedsAfterTwo503s(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Status(503),
			httpretrytest.Status(503),
			httpretrytest.Respond(201, `{"id":"ch_1"}`),
		)
		tr := &httpretry.Transport{Base: upstream}
		start := time.Now()
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodPost, "/charges", `{"amount":1999}`))
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode)
		assert.Equal(t, "201 Created", resp.Status)

		reqs := upstream.Requests()
		assert.True(t, httpretrytest.CheckAttempts(t, reqs, 3))
		assert.True(t, httpretrytest.CheckSameKey(t, reqs))
		assert.True(t, httpretrytest.CheckSameBody(t, reqs))
		assert.True(t, httpretrytest.CheckDiscardedClosed(t, reqs))
		assert.Equal(t, `{"amount":1999}`, string(reqs[0].Body))
		assert.Equal(t, []int{503, 503, 201}, statuses(reqs))
		assert.Equal(t, "/charges", reqs[2].URL.Path)
		assert.Equal(t, http.MethodPost, reqs[2].Method)
		assert.True(t, reqs[0].GetBody, "httpretry gives every attempt a GetBody")
		assert.Equal(t, start, reqs[0].Time, "times are read on the bubble's clock")
		assert.Greater(t, reqs[2].Time.Sub(start), time.Duration(0), "backoff waited, on the fake clock")

		assert.Equal(t, `{"id":"ch_1"}`, readBody(t, resp))
		resp.Body.Close()
		assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
	})
}

func statuses(reqs []httpretrytest.Request) []int {
	out := make([]int, len(reqs))
	for i, r := range reqs {
		out[i] = r.Status
	}
	return out
}

func TestScriptRepeatsItsLastOutcome(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(503))
		resp, err := (&httpretry.Transport{Base: upstream}).RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the last 503 is returned untouched")
		assert.Equal(t, "Service Unavailable", readBody(t, resp))
		resp.Body.Close()
		reqs := upstream.Requests()
		assert.True(t, httpretrytest.CheckAttempts(t, reqs, 4), "the default policy's 4 attempts")
		assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
	})
}

func TestScriptErrorsAreClassifiedAsTheNetworkWould(t *testing.T) {
	t.Parallel()
	req := newReq(t, context.Background(), http.MethodPatch, "/", "")
	for _, tc := range []struct {
		name    string
		err     error
		is      error
		class   httpretry.Class
		timeout bool
	}{
		{"reset", httpretrytest.ConnReset(), syscall.ECONNRESET, httpretry.ClassTransient, false},
		{"refused", httpretrytest.DialRefused(), syscall.ECONNREFUSED, httpretry.ClassNotProcessed, false},
		{"timeout", httpretrytest.Timeout(), os.ErrDeadlineExceeded, httpretry.ClassTransient, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opErr *net.OpError
			require.ErrorAs(t, tc.err, &opErr)
			assert.ErrorIs(t, tc.err, tc.is)
			var ne net.Error
			require.ErrorAs(t, tc.err, &ne)
			assert.Equal(t, tc.timeout, ne.Timeout())
			assert.Equal(t, tc.class, httpretry.Classify(req, nil, tc.err))
		})
	}
}

func TestScriptErrorsDecideWhatIsRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A PATCH without a key is retried only when nothing was sent.
		for _, tc := range []struct {
			err      error
			attempts int
		}{
			{httpretrytest.DialRefused(), 2},
			{httpretrytest.ConnReset(), 1},
			{httpretrytest.Timeout(), 1},
		} {
			upstream := httpretrytest.NewScript(httpretrytest.Fail(tc.err), httpretrytest.Status(200))
			resp, err := (&httpretry.Transport{Base: upstream}).RoundTrip(newReq(t, t.Context(), http.MethodPatch, "/", "x"))
			if tc.attempts == 2 {
				require.NoError(t, err)
				resp.Body.Close()
			} else {
				assert.ErrorIs(t, err, tc.err.(*net.OpError).Err)
			}
			reqs := upstream.Requests()
			assert.True(t, httpretrytest.CheckAttempts(t, reqs, tc.attempts), "%v", tc.err)
			assert.Equal(t, tc.err, reqs[0].Err, "the error is recorded")
		}
	})
}

func TestScriptRetryAfterAndRateLimitRunOnTheFakeClock(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.RetryAfter(503, "30"),
			httpretrytest.Status(429).Header("RateLimit", `"default";r=0;t=10`),
			httpretrytest.Status(200),
		)
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record}
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		resp.Body.Close()

		reqs := upstream.Requests()
		require.True(t, httpretrytest.CheckAttempts(t, reqs, 3))
		assert.GreaterOrEqual(t, reqs[1].Time.Sub(reqs[0].Time), 30*time.Second)
		assert.GreaterOrEqual(t, reqs[2].Time.Sub(reqs[1].Time), 10*time.Second)
		attempts := log.Attempts()
		require.Len(t, attempts, 3)
		assert.Equal(t, httpretry.DelayRetryAfter, attempts[0].DelaySource)
		assert.Equal(t, httpretry.DelayRateLimit, attempts[1].DelaySource)
	})
}

func TestScriptLateAnswerHonoursTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(200).After(5 * time.Second))
		start := time.Now()
		resp, err := upstream.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 5*time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		_, err = upstream.RoundTrip(newReq(t, ctx, http.MethodGet, "/", ""))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		assert.ErrorIs(t, upstream.Requests()[1].Err, context.DeadlineExceeded)
	})
}

func TestScriptLateAnswerUnderAttemptTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Status(200).After(time.Minute),
			httpretrytest.Status(200).After(100*time.Millisecond),
		)
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{
			AttemptTimeout: time.Second, Backoff: backoff.Constant(0)}}
		start := time.Now()
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1100*time.Millisecond, time.Since(start))
		reqs := upstream.Requests()
		require.True(t, httpretrytest.CheckAttempts(t, reqs, 2))
		assert.ErrorIs(t, reqs[0].Err, httpretry.ErrAttemptTimeout, "the cause of the attempt's cancellation")
	})
}

func TestScriptRespondOnCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Minute).RespondOnCancel())
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		resp, err := upstream.RoundTrip(newReq(t, ctx, http.MethodGet, "/", ""))
		require.NoError(t, err, "a response despite the cancelled context")
		assert.Equal(t, 200, resp.StatusCode)
		resp.Body.Close()
		reqs := upstream.Requests()
		assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
		assert.ErrorIs(t, reqs[0].ContextErr, context.DeadlineExceeded, "the cancellation is recorded")
		assert.NoError(t, reqs[0].Err)
	})
}

// A hedged request: the first attempt is slow, the hedge sent after a
// second wins, and the loser is cancelled yet still answers, as a Base that
// ignores cancellation does. Every body handed out must be closed.
func TestScriptUnderHedging(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Respond(200, "slow").After(10*time.Second).RespondOnCancel(),
			httpretrytest.Respond(201, "fast").After(100*time.Millisecond),
		)
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		start := time.Now()
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodPost, "/", `{"q":1}`))
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode)
		assert.Equal(t, 1100*time.Millisecond, time.Since(start))
		assert.Equal(t, "fast", readBody(t, resp))
		resp.Body.Close()
		synctest.Wait() // let the loser be reaped

		reqs := upstream.Requests()
		require.True(t, httpretrytest.CheckAttempts(t, reqs, 2))
		assert.True(t, httpretrytest.CheckSameKey(t, reqs))
		assert.True(t, httpretrytest.CheckSameBody(t, reqs))
		assert.Error(t, reqs[0].ContextErr, "the loser was cancelled")
		assert.NoError(t, reqs[1].ContextErr)
		assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
	})
}

func TestScriptCountsIdleClosures(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript()
	(&httpretry.Transport{Base: upstream}).CloseIdleConnections()
	assert.Equal(t, 1, upstream.IdleClosures(), "forwarded by httpretry")
}

func TestNilURLIsRefused(t *testing.T) {
	t.Parallel()
	for _, rt := range []http.RoundTripper{httpretrytest.NewScript(httpretrytest.Status(200)), &httpretrytest.HandlerTransport{}} {
		body := httpretrytest.NewBody("x")
		_, err := rt.RoundTrip(&http.Request{Method: http.MethodPost, Body: body})
		assert.ErrorContains(t, err, "nil Request.URL")
		assert.Equal(t, 1, body.Closes())
	}
}

func TestScriptSlowBody(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "abc").Slow(1, time.Second))
		start := time.Now()
		resp, err := upstream.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		assert.Equal(t, time.Duration(0), time.Since(start), "the head comes at once")
		assert.Equal(t, "abc", readBody(t, resp))
		assert.Equal(t, 3*time.Second, time.Since(start), "one byte a second")
		resp.Body.Close()

		// The request's context ends a pausing read with its cause.
		ctx, cancel := context.WithCancelCause(t.Context())
		resp, err = upstream.RoundTrip(newReq(t, ctx, http.MethodGet, "/", ""))
		require.NoError(t, err)
		time.AfterFunc(1500*time.Millisecond, func() { cancel(errBoom) })
		b, err := io.ReadAll(resp.Body)
		assert.Equal(t, "a", string(b))
		assert.ErrorIs(t, err, errBoom)
		resp.Body.Close()

		// Close ends a pausing read.
		resp, err = upstream.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		time.AfterFunc(500*time.Millisecond, func() { resp.Body.Close() })
		_, err = resp.Body.Read(make([]byte, 8))
		assert.ErrorIs(t, err, httpretrytest.ErrBodyClosed)
		assert.True(t, httpretrytest.CheckBodiesClosed(t, upstream.Requests()))
	})
}

var errBoom = errors.New("boom")

func TestScriptBodyThatFailsHalfway(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(
		httpretrytest.Respond(200, "hello world").FailAfter(5, nil),
		httpretrytest.Respond(200, "hello world").FailAfter(6, httpretrytest.ConnReset()),
	)
	resp, err := upstream.RoundTrip(newReq(t, context.Background(), http.MethodGet, "/", ""))
	require.NoError(t, err)
	assert.EqualValues(t, 11, resp.ContentLength, "the body looks cut short")
	b, err := io.ReadAll(resp.Body)
	assert.Equal(t, "hello", string(b))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	resp.Body.Close()

	resp, err = upstream.RoundTrip(newReq(t, context.Background(), http.MethodGet, "/", ""))
	require.NoError(t, err)
	b, err = io.ReadAll(resp.Body)
	assert.Equal(t, "hello ", string(b))
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	resp.Body.Close()
}

func TestScriptFillerBodyIsDrainedBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(503).Filler(1<<30), httpretrytest.Status(200))
		resp, err := (&httpretry.Transport{Base: upstream}).RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		resp.Body.Close()
		reqs := upstream.Requests()
		require.Len(t, reqs, 2)
		assert.LessOrEqual(t, reqs[0].ResponseBody.BytesRead(), int64(64<<10), "a 1 GiB error page is drained at most 64 KiB")
		assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
	})
}

func TestScriptRoutes(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "default")).
		OnPath("/a", httpretrytest.Respond(200, "a1"), httpretrytest.Respond(200, "a2")).
		On(func(r *http.Request) bool { return r.Method == http.MethodDelete }, httpretrytest.Status(204))
	var got []string
	for _, rq := range []struct{ method, path string }{
		{"GET", "/a"}, {"GET", "/b"}, {"DELETE", "/b"}, {"GET", "/a"}, {"GET", "/a"}, {"GET", "/a/b"},
	} {
		resp, err := upstream.RoundTrip(newReq(t, context.Background(), rq.method, rq.path, ""))
		require.NoError(t, err)
		got = append(got, resp.Status+" "+readBody(t, resp))
		resp.Body.Close()
	}
	assert.Equal(t, []string{
		"200 OK a1", "200 OK default", "204 No Content No Content", "200 OK a2", "200 OK a2", "200 OK default",
	}, got, "each route keeps its own position and repeats its last outcome")
}

func TestScriptWithoutOutcomesFails(t *testing.T) {
	t.Parallel()
	var upstream httpretrytest.Script
	req, _ := http.NewRequest(http.MethodGet, "https://user:secret@api.example.com/x", nil)
	_, err := upstream.RoundTrip(req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no outcome scripted for GET https://user:xxxxx@api.example.com/x")
	assert.Len(t, upstream.Requests(), 1)
}

func TestScriptRequestBodyFailure(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(httpretrytest.Status(200))
	body := httpretrytest.NewBody("hello world").FailAfter(5, errBoom)
	req, _ := http.NewRequest(http.MethodPost, api, body)
	_, err := upstream.RoundTrip(req)
	assert.ErrorIs(t, err, errBoom)
	assert.Equal(t, 1, body.Closes(), "the request body is closed, once")
	reqs := upstream.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "hello", string(reqs[0].Body), "what was read before the failure")
	assert.ErrorIs(t, reqs[0].Err, errBoom)
}

func TestScriptClosesRequestBodies(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(httpretrytest.Status(200))
	body := httpretrytest.NewBody("payload")
	req, _ := http.NewRequest(http.MethodPost, api, body)
	resp, err := upstream.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, body.Closes())
	assert.EqualValues(t, 7, body.BytesRead())
}

func TestScriptFunc(t *testing.T) {
	t.Parallel()
	inner := httpretrytest.NewBody("from f")
	upstream := httpretrytest.NewScript(
		httpretrytest.Func(func(r *http.Request) (*http.Response, error) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: 202, Header: http.Header{"X-Echo": {string(b)}}, Body: inner}, nil
		}),
		httpretrytest.Func(func(*http.Request) (*http.Response, error) { return nil, errBoom }),
	)
	resp, err := upstream.RoundTrip(newReq(t, context.Background(), http.MethodPost, "/", "ping"))
	require.NoError(t, err)
	assert.Equal(t, "ping", resp.Header.Get("X-Echo"), "f sees the body the Script read")
	assert.Equal(t, "from f", readBody(t, resp))
	resp.Body.Close()
	assert.Equal(t, 1, inner.Closes(), "closing the wrapper closes f's body")

	_, err = upstream.RoundTrip(newReq(t, context.Background(), http.MethodPost, "/", "ping"))
	assert.ErrorIs(t, err, errBoom)
	reqs := upstream.Requests()
	assert.Equal(t, []int{202, 0}, statuses(reqs))
	assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
}

func TestScriptKeyHeader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
		upstream.KeyHeader = "X-Request-Key"
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{Keys: httpretry.KeyPolicy{Header: "X-Request-Key"}}}
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodPost, "/", "x"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.True(t, httpretrytest.CheckSameKey(t, upstream.Requests()))
	})
}

func TestScriptIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(httpretrytest.Status(200)).OnPath("/busy", httpretrytest.Status(503))
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			path := "/"
			if i%2 == 0 {
				path = "/busy"
			}
			resp, err := upstream.RoundTrip(newReq(t, context.Background(), http.MethodGet, path, ""))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
			_ = upstream.Requests()
		})
	}
	wg.Wait()
	reqs := upstream.Requests()
	assert.Len(t, reqs, 50)
	assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
}
