package bench

import (
	"net"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompareRetryableHTTPAPI backs what docs/migration.md's concept
// mapping says of go-retryablehttp v0.7.8's settings and hooks, so that a
// reader moving to httpretry knows what each one did.
func TestCompareRetryableHTTPAPI(t *testing.T) {
	// NewClient: 4 retries, waits from 1 s to 30 s, go-cleanhttp's pooled
	// client (keep-alives on, as many idle connections per host as
	// GOMAXPROCS+1, 90 s idle timeout), a logger.
	t.Run("NewClient", func(t *testing.T) {
		c := retryablehttp.NewClient()
		assert.Equal(t, 4, c.RetryMax)
		assert.Equal(t, time.Second, c.RetryWaitMin)
		assert.Equal(t, 30*time.Second, c.RetryWaitMax)
		assert.NotNil(t, c.Logger)
		tr, ok := c.HTTPClient.Transport.(*http.Transport)
		require.True(t, ok)
		want := cleanhttp.DefaultPooledTransport()
		assert.False(t, tr.DisableKeepAlives)
		assert.Equal(t, runtime.GOMAXPROCS(0)+1, tr.MaxIdleConnsPerHost)
		assert.Equal(t, want.MaxIdleConnsPerHost, tr.MaxIdleConnsPerHost)
		assert.Equal(t, want.IdleConnTimeout, tr.IdleConnTimeout)
		assert.Equal(t, want.TLSHandshakeTimeout, tr.TLSHandshakeTimeout)
	})

	// The hooks, for a GET answered 503, 503, 200: RequestLogHook before
	// every attempt, counting from 0; ResponseLogHook after every response;
	// PrepareRetry before each retry only, not before the first attempt.
	t.Run("hooks", func(t *testing.T) {
		srv := newScripted(t, 503, 503, 200)
		rt := newRetryableHTTP(newBare(), 0).(*retryablehttp.RoundTripper)
		var requests []int
		var responses []int
		prepared := 0
		rt.Client.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, i int) { requests = append(requests, i) }
		rt.Client.ResponseLogHook = func(_ retryablehttp.Logger, resp *http.Response) {
			responses = append(responses, resp.StatusCode)
		}
		rt.Client.PrepareRetry = func(*http.Request) error { prepared++; return nil }
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		closeResp(resp)
		assert.Equal(t, []int{0, 1, 2}, requests, "RequestLogHook's i")
		assert.Equal(t, []int{503, 503, 200}, responses, "ResponseLogHook")
		assert.Equal(t, 2, prepared, "PrepareRetry calls")
	})

	// ResponseLogHook is not called for an attempt that ends in an error.
	t.Run("ResponseLogHook on errors", func(t *testing.T) {
		rt := newRetryableHTTP(roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, errRefused
		}), 0).(*retryablehttp.RoundTripper)
		calls := 0
		rt.Client.ResponseLogHook = func(retryablehttp.Logger, *http.Response) { calls++ }
		req, _ := http.NewRequest(http.MethodGet, "http://refused.test/", nil)
		_, err := rt.RoundTrip(req)
		require.Error(t, err)
		assert.Zero(t, calls)
	})

	// PassthroughErrorHandler: when retries run out on a response, that
	// response is returned with a nil error, its body open.
	t.Run("PassthroughErrorHandler", func(t *testing.T) {
		srv := newScripted(t, 503)
		rt := newRetryableHTTP(newBare(), 0).(*retryablehttp.RoundTripper)
		rt.Client.ErrorHandler = retryablehttp.PassthroughErrorHandler
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		closeResp(resp)
		assert.Equal(t, 4, srv.received())
	})

	// LinearJitterBackoff draws between min and max and multiplies by the
	// retry number (attemptNum + 1): retry n waits between n·min and n·max.
	// RateLimitLinearJitterBackoff takes Retry-After first, on a 429.
	t.Run("LinearJitterBackoff", func(t *testing.T) {
		lo, hi := 100*time.Millisecond, 300*time.Millisecond
		for attempt := range 4 {
			n := time.Duration(attempt + 1)
			for range 200 {
				d := retryablehttp.LinearJitterBackoff(lo, hi, attempt, nil)
				assert.GreaterOrEqual(t, d, n*lo)
				assert.LessOrEqual(t, d, n*hi)
			}
		}
		resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"7"}}}
		assert.Equal(t, 7*time.Second, retryablehttp.RateLimitLinearJitterBackoff(lo, hi, 0, resp))
	})
}

// errRefused is the error of a connection the server refused.
var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
