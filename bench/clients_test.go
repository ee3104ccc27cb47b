package bench

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// newBare returns the transport every client is layered on: one per client,
// all configured alike, so that no client shares another's connections.
func newBare() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
	}
}

// library builds one retrying client over base. wait is the backoff between
// retries: the benchmarks use each library's usual 100 ms-to-3 s range, the
// behaviour tests 0 so that nothing sleeps.
type library struct {
	name string
	new  func(base http.RoundTripper, wait time.Duration) http.RoundTripper
}

var libraries = []library{
	{"httpretry", newHTTPRetry},
	{"retryablehttp", newRetryableHTTP},
	{"failsafehttp", newFailsafeHTTP},
}

func newHTTPRetry(base http.RoundTripper, wait time.Duration) http.RoundTripper {
	var p httpretry.Policy // the default policy: 4 attempts, 100 ms–3 s full jitter
	if wait == 0 {
		p.Backoff = backoff.Constant(0)
	}
	return &httpretry.Transport{Base: base, Policy: p}
}

// newRetryableHTTP is go-retryablehttp's RoundTripper with its default
// retry policy and backoff, 4 attempts like the others, and no logger (its
// default logs every request to stderr).
func newRetryableHTTP(base http.RoundTripper, wait time.Duration) http.RoundTripper {
	return &retryablehttp.RoundTripper{Client: &retryablehttp.Client{
		HTTPClient:   &http.Client{Transport: base},
		RetryWaitMin: wait,
		RetryWaitMax: 30 * wait,
		RetryMax:     3,
		CheckRetry:   retryablehttp.DefaultRetryPolicy,
		Backoff:      retryablehttp.DefaultBackoff,
	}}
}

// newFailsafeHTTP is failsafehttp's round tripper with its HTTP retry
// policy (which obeys Retry-After), 4 attempts like the others.
func newFailsafeHTTP(base http.RoundTripper, wait time.Duration) http.RoundTripper {
	b := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3)
	if wait > 0 {
		b = b.WithBackoff(wait, 30*wait)
	}
	return failsafehttp.NewRoundTripper(base, b.Build())
}

// tracker is a RoundTripper under test that counts attempts and records
// every response body it hands out, to see which ones get closed.
type tracker struct {
	base     http.RoundTripper
	attempts atomic.Int32
	mu       sync.Mutex
	bodies   []*trackedBody
}

func (t *tracker) RoundTrip(req *http.Request) (*http.Response, error) {
	t.attempts.Add(1)
	resp, err := t.base.RoundTrip(req)
	if resp != nil {
		b := &trackedBody{ReadCloser: resp.Body}
		resp.Body = b
		t.mu.Lock()
		t.bodies = append(t.bodies, b)
		t.mu.Unlock()
	}
	return resp, err
}

// read reports, for every response handed out so far, how many bytes of
// its body were read.
func (t *tracker) read() []int64 {
	return eachBody(t, func(b *trackedBody) int64 { return b.read.Load() })
}

// closed reports, for every response handed out so far, whether its body
// was closed.
func (t *tracker) closed() []bool {
	return eachBody(t, func(b *trackedBody) bool { return b.closed.Load() })
}

// eachBody applies f to every body t has handed out so far, in order.
func eachBody[T any](t *tracker, f func(*trackedBody) T) []T {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := make([]T, len(t.bodies))
	for i, b := range t.bodies {
		r[i] = f(b)
	}
	return r
}

type trackedBody struct {
	io.ReadCloser
	read   atomic.Int64 // bytes read from it
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}
