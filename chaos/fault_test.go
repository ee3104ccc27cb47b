package chaos_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

// always wraps upstream in a Transport that strikes every request with f.
func always(upstream http.RoundTripper, f chaos.Fault) *chaos.Transport {
	return &chaos.Transport{Next: upstream, Rules: []chaos.Rule{{Rate: 1, Fault: f}}}
}

func TestResponseFaultsNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fault  chaos.Fault
		status int
		header http.Header
		body   string
	}{
		{chaos.Status(503), 503, http.Header{}, "Service Unavailable"},
		{chaos.RetryAfter(429, 1500*time.Millisecond), 429, http.Header{"Retry-After": {"2"}}, "Too Many Requests"},
		{chaos.Respond(502, http.Header{"X-Gateway": {"edge"}}, "upstream gone"), 502, http.Header{"X-Gateway": {"edge"}}, "upstream gone"},
	} {
		upstream := httpretrytest.NewScript(httpretrytest.Status(200))
		resp, err := always(upstream, tc.fault).RoundTrip(get(t, context.Background(), "https://api.example.com/"))
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, tc.status, resp.StatusCode)
		assert.Equal(t, tc.header, resp.Header)
		assert.Equal(t, tc.body, string(b))
		assert.EqualValues(t, len(tc.body), resp.ContentLength)
		assert.Empty(t, upstream.Requests())
	}
}

func TestErrorFaultsAreTheNetworksOwn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			fault    chaos.Fault
			is       error
			timeout  bool
			class    httpretry.Class
			upstream int // requests the upstream saw
			took     time.Duration
		}{
			{"reset", chaos.Reset(), syscall.ECONNRESET, false, httpretry.ClassTransient, 1, 0},
			{"refuse", chaos.Refuse(), syscall.ECONNREFUSED, false, httpretry.ClassNotProcessed, 0, 0},
			{"timeout", chaos.Timeout(3 * time.Second), os.ErrDeadlineExceeded, true, httpretry.ClassTransient, 0, 3 * time.Second},
		} {
			upstream := httpretrytest.NewScript(httpretrytest.Status(200))
			req := get(t, t.Context(), "https://api.example.com/")
			start := time.Now()
			_, err := always(upstream, tc.fault).RoundTrip(req)
			assert.Equal(t, tc.took, time.Since(start), tc.name)
			assert.ErrorIs(t, err, tc.is, tc.name)
			var ne net.Error
			require.ErrorAs(t, err, &ne, tc.name)
			assert.Equal(t, tc.timeout, ne.Timeout(), tc.name)
			assert.Equal(t, tc.class, httpretry.Classify(req, nil, err), tc.name)
			reqs := upstream.Requests()
			assert.Len(t, reqs, tc.upstream, tc.name)
			assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs), "a reset throws the response away, closed")
		}
	})
}

func TestTimingFaultsHonourTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, f := range []chaos.Fault{chaos.Latency(time.Hour), chaos.Timeout(time.Hour)} {
			upstream := httpretrytest.NewScript(httpretrytest.Status(200))
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(time.Second, func() { cancel(errStop) })
			start := time.Now()
			_, err := always(upstream, f).RoundTrip(get(t, ctx, "https://api.example.com/"))
			assert.ErrorIs(t, err, errStop)
			assert.Equal(t, time.Second, time.Since(start))
			assert.Empty(t, upstream.Requests())
		}
	})
}

var errStop = errors.New("stop")

func TestLatencyDelaysThenPassesOn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "late"))
		start := time.Now()
		resp, err := always(upstream, chaos.Latency(800*time.Millisecond)).RoundTrip(get(t, t.Context(), "https://api.example.com/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 800*time.Millisecond, time.Since(start))
		require.Len(t, upstream.Requests(), 1)
		assert.Equal(t, start.Add(800*time.Millisecond), upstream.Requests()[0].Time)
	})
}

func TestTruncateCutsTheBody(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(httpretrytest.Respond(200, `{"items":[1,2,3]}`))
	resp, err := always(upstream, chaos.Truncate(9)).RoundTrip(get(t, context.Background(), "https://api.example.com/"))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode, "the head arrives intact")
	b, err := io.ReadAll(resp.Body)
	assert.Equal(t, `{"items":`, string(b))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	resp.Body.Close()
	assert.True(t, httpretrytest.CheckBodiesClosed(t, upstream.Requests()), "closing the cut body closes the upstream's")

	// A body shorter than the cut ends normally.
	resp, err = always(upstream, chaos.Truncate(1000)).RoundTrip(get(t, context.Background(), "https://api.example.com/"))
	require.NoError(t, err)
	b, err = io.ReadAll(resp.Body)
	assert.NoError(t, err)
	assert.Equal(t, `{"items":[1,2,3]}`, string(b))
	resp.Body.Close()
}

func TestFaultsPassOnTheUpstreamsErrors(t *testing.T) {
	t.Parallel()
	for _, f := range []chaos.Fault{chaos.Reset(), chaos.Truncate(1), chaos.Latency(0)} {
		upstream := httpretrytest.NewScript(httpretrytest.Fail(errStop))
		_, err := always(upstream, f).RoundTrip(get(t, context.Background(), "https://api.example.com/"))
		assert.ErrorIs(t, err, errStop)
	}
}

func TestChain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "abcdef"))
		f := chaos.Chain(chaos.Latency(time.Second), chaos.Latency(time.Second), chaos.Truncate(2))
		start := time.Now()
		resp, err := always(upstream, f).RoundTrip(get(t, t.Context(), "https://api.example.com/"))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, "ab", string(b))
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)

		resp, err = always(upstream, chaos.Chain(chaos.Latency(time.Second), chaos.Status(503))).
			RoundTrip(get(t, t.Context(), "https://api.example.com/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode, "a slow 503")
		assert.Len(t, upstream.Requests(), 1, "the 503 answered for the upstream")

		resp, err = always(upstream, chaos.Chain()).RoundTrip(get(t, t.Context(), "https://api.example.com/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, "an empty chain passes the request on")
	})
}

// Under httpretry, each attempt meets the faults on its own: the retries
// absorb them.
func TestUnderHTTPRetryEveryRequestSucceeds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(200))
		var attempts, retries int
		client := &http.Client{Transport: &httpretry.Transport{
			Base: &chaos.Transport{Next: upstream, Seed: 1, Rules: []chaos.Rule{
				{Name: "503", Rate: 0.05, Fault: chaos.Status(503)},
				{Name: "reset", Method: http.MethodPost, Rate: 0.05, Fault: chaos.Reset()},
			}},
			OnAttempt: func(a httpretry.Attempt) {
				attempts++
				if a.Retry {
					retries++
				}
			},
		}}
		const n = 500
		for i := range n {
			method := http.MethodGet
			if i%2 == 1 {
				method = http.MethodPost
			}
			req, _ := http.NewRequestWithContext(t.Context(), method, "https://api.example.com/charges", strings.NewReader("{}"))
			resp, err := client.Do(req)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			resp.Body.Close()
		}
		assert.Greater(t, retries, 0)
		assert.Equal(t, n+retries, attempts)

		// A reset POST reached the upstream, and its retry carried the same
		// key: the upstream can tell it applied the charge already.
		byKey := map[string]int{}
		for _, r := range upstream.Requests() {
			if r.Method == http.MethodPost {
				byKey[r.Key]++
			}
		}
		twice := 0
		for k, c := range byKey {
			require.NotEmpty(t, k)
			if c > 1 {
				twice++
			}
		}
		assert.Positive(t, twice, "some charges were sent twice, under one key")
		assert.Len(t, byKey, n/2, "one key per charge")
	})
}

func TestRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0", time.Millisecond: "1", time.Second: "1", 1001 * time.Millisecond: "2", time.Minute: "60",
	} {
		resp, err := always(nil, chaos.RetryAfter(503, d)).RoundTrip(get(t, context.Background(), "https://api.example.com/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.Header.Get("Retry-After"), "%v", d)
		got, ok := httpretry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		assert.True(t, ok)
		assert.GreaterOrEqual(t, got, d, "never shorter than asked")
	}
}
