package httpretry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestBodyReplay(t *testing.T) {
	t.Parallel()
	payload := strings.Repeat("0123456789", 100) // 1000 bytes
	cases := []struct {
		name        string
		body        func() io.Reader // wrapped so that http.NewRequest sets no GetBody
		getBody     bool
		limit       int64
		attempts    int
		wantGetBody bool // the attempt requests carry GetBody
	}{
		{name: "GetBody from bytes.Reader", body: func() io.Reader { return bytes.NewReader([]byte(payload)) },
			getBody: true, attempts: 3, wantGetBody: true},
		{name: "opaque reader under the limit is copied as sent", body: opaque(payload), attempts: 3, wantGetBody: true},
		{name: "opaque reader at the limit is copied as sent", body: opaque(payload), limit: 1000, attempts: 3, wantGetBody: true},
		// Its GetBody is set before anyone knows the body is too long; once
		// it is, GetBody fails, as it would for net/http.
		{name: "opaque reader over the limit is sent once", body: opaque(payload), limit: 999, attempts: 1, wantGetBody: true},
		{name: "negative limit never buffers", body: opaque(payload), limit: -1, attempts: 1},
		{name: "negative limit still uses GetBody", body: func() io.Reader { return strings.NewReader(payload) },
			getBody: true, limit: -1, attempts: 3, wantGetBody: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Status(200))
				tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{MaxReplayBytes: tc.limit}}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, site, tc.body())
				require.NoError(t, err)
				require.Equal(t, tc.getBody, req.GetBody != nil)
				origBody, origLen := req.Body, req.ContentLength
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.True(t, origBody == req.Body, "the caller's Body field is untouched")
				assert.Equal(t, origLen, req.ContentLength)
				seen := fake.Requests()
				require.Len(t, seen, tc.attempts)
				for _, s := range seen {
					assert.Equal(t, payload, string(s.Body), "every attempt sends the whole body")
					assert.Equal(t, tc.wantGetBody, s.GetBody)
				}
			})
		})
	}
}

// opaque hides the reader's type so that http.NewRequest cannot set GetBody.
func opaque(s string) func() io.Reader {
	return func() io.Reader { return struct{ io.Reader }{strings.NewReader(s)} }
}

func TestCallerBodyClosedExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, limit := range []int64{0, 3, -1} {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
			body := httpretrytest.NewBody("hello")
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, site, body)
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{MaxReplayBytes: limit}}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 1, body.Closes(), "limit %d", limit)
			assert.Equal(t, "hello", string(fake.Requests()[0].Body))
		})
	}
}

func TestBodyErrors(t *testing.T) {
	t.Parallel()
	t.Run("a body that errors half-way while it is sent", func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		body := httpretrytest.NewBody("hello world").FailAfter(5, errBoom)
		req, _ := http.NewRequest(http.MethodPost, site, body)
		resp, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, httpretry.ErrRequestBody)
		assert.ErrorIs(t, err, errBoom)
		assert.Len(t, fake.Requests(), 1, "sent as it is read, and not sent again")
		assert.Equal(t, 1, body.Closes())
	})
	t.Run("a Content-Length that lies", func(t *testing.T) {
		for _, n := range []int64{3, 50} {
			fake := httpretrytest.NewScript(httpretrytest.Status(200))
			body := httpretrytest.NewBody("0123456789")
			req, _ := http.NewRequest(http.MethodPut, site, body)
			req.ContentLength = n
			_, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
			assert.ErrorIs(t, err, httpretry.ErrRequestBody)
			assert.ErrorContains(t, err, "ContentLength")
			assert.Len(t, fake.Requests(), 1, "found out as it is sent, as net/http finds out, and not sent again")
			assert.Equal(t, 1, body.Closes())
		}
	})
	t.Run("GetBody that errors before a retry returns the response in hand", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, site, strings.NewReader("x"))
			req.GetBody = func() (io.ReadCloser, error) { return nil, errBoom }
			resp, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
			assert.Equal(t, "Service Unavailable", readAll(t, resp.Body))
			resp.Body.Close()
			assert.Len(t, fake.Requests(), 1)
		})
	})
	t.Run("GetBody that errors after a transport error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := httpretrytest.NewScript(httpretrytest.Fail(io.EOF))
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, site, strings.NewReader("x"))
			req.GetBody = func() (io.ReadCloser, error) { return nil, errBoom }
			_, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
			assert.ErrorIs(t, err, httpretry.ErrRequestBody)
			assert.ErrorIs(t, err, errBoom)
			assert.ErrorIs(t, err, io.EOF)
		})
	})
	t.Run("a large body is streamed intact past the limit", func(t *testing.T) {
		const size = 8 << 20
		var got int64
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			n, err := io.Copy(io.Discard, req.Body) // counted, not kept as a Script would
			got = n
			req.Body.Close()
			return &http.Response{StatusCode: 200, Body: http.NoBody}, err
		})
		body := httpretrytest.NewFillerBody(size)
		req, _ := http.NewRequest(http.MethodPost, site, body)
		req.ContentLength = -1
		resp, err := (&httpretry.Transport{Base: base}).RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.EqualValues(t, size, got)
		assert.Positive(t, body.Closes())
	})
}

func TestDiscardedBodiesAreDrainedBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		huge := httpretrytest.Status(503).Filler(1 << 30) // a 1 GiB error page
		fake := httpretrytest.NewScript(huge, huge, httpretrytest.Status(200))
		resp, err := (&httpretry.Transport{Base: fake}).RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		reqs := fake.Requests()
		require.Len(t, reqs, 3)
		for _, r := range reqs[:2] {
			assert.Positive(t, r.ResponseBody.Closes())
			assert.LessOrEqual(t, r.ResponseBody.BytesRead(), int64(64<<10), "at most 64 KiB drained")
		}
	})
}

func TestDrainIsBoundedInTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A byte every 50 ms, for ever, then a success.
		base := httpretrytest.NewScript(httpretrytest.Status(503).Filler(1<<30).Slow(1, 50*time.Millisecond), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 250*time.Millisecond, time.Since(start), "a trickling error body is cut after 250 ms")
		reqs := base.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, 1, reqs[0].ResponseBody.Closes(), "closed exactly once")
	})
}

// TestBodyIsNotReadAhead: a body without GetBody is sent as Base reads
// it, never read ahead of Base: the request reaches Base while the producer
// is stalled, and when the caller's context ends, Base (net/http closes
// the body of a cancelled request) ends the read in progress by closing
// the body, which closes the caller's stream, once.
func TestBodyIsNotReadAhead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var reached time.Duration
		start := time.Now()
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			reached = time.Since(start)
			read := make(chan error, 1)
			go func() { _, err := io.ReadAll(req.Body); read <- err }()
			select {
			case err := <-read:
				return nil, err
			case <-req.Context().Done():
				req.Body.Close() // as net/http's write loop is stopped
				<-read
				return nil, context.Cause(req.Context())
			}
		})
		body := httpretrytest.NewBody("x").Slow(1, 24*time.Hour) // a producer stalled for a day
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, site, body)
		resp, err := (&httpretry.Transport{Base: base}).RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, reached, "Base got the request at once")
		assert.Equal(t, time.Second, time.Since(start), "returned when the context ended")
		synctest.Wait()
		assert.Equal(t, 1, body.Closes(), "the caller's body closed once")
	})
}

// TestDrainCountsAgainstTheDeadline: the discarded response is drained
// before the wait, and the wait is checked against the deadline after the
// drain: when the drain leaves too little time, the response in hand is
// returned, whole, and OnAttempt is told so.
func TestDrainCountsAgainstTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A short error page, delivered over 100 ms.
		base := httpretrytest.NewScript(httpretrytest.Respond(503, "upstream overloaded").Slow(10, 50*time.Millisecond))
		var got []httpretry.Attempt
		tr := &httpretry.Transport{Base: base, OnAttempt: func(a httpretry.Attempt) { got = append(got, a) },
			Policy: httpretry.Policy{Backoff: backoff.Constant(time.Second)}}
		// The 1 s wait fits the 1.05 s left before the drain, not after it.
		ctx, cancel := context.WithTimeout(t.Context(), 1050*time.Millisecond)
		defer cancel()
		resp, err := tr.RoundTrip(get(t, ctx))
		require.NoError(t, err, "the response in hand is returned")
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "upstream overloaded", readAll(t, resp.Body))
		resp.Body.Close()
		reqs := base.Requests()
		require.Len(t, reqs, 1)
		require.Len(t, got, 1)
		assert.False(t, got[0].Retry, "OnAttempt is not told of a retry that does not happen")
		assert.Equal(t, httpretry.StopDeadline, got[0].Stop)
		assert.Equal(t, 1, reqs[0].ResponseBody.Closes())
	})
}

// TestDeadlineAfterAnEndlessDrain: when the drain of a body that never
// ends leaves too little time for the wait, the response is gone (only
// 64 KiB that arrive within 250 ms are kept), so the caller gets an error
// with the status seen, never a response whose body was consumed.
func TestDeadlineAfterAnEndlessDrain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A byte every 50 ms, for ever.
		base := httpretrytest.NewScript(httpretrytest.Status(503).Filler(1<<30).Slow(1, 50*time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), 1100*time.Millisecond)
		defer cancel()
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Second)}}
		resp, err := tr.RoundTrip(get(t, ctx))
		assert.Nil(t, resp)
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopDeadline, re.Stop)
		assert.Equal(t, 503, re.LastStatus)
		reqs := base.Requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, 1, reqs[0].ResponseBody.Closes(), "closed once")
	})
}

// TestHugeReplayLimit: MaxReplayBytes of math.MaxInt64, the natural way to
// say "no limit", buffers the body like any other: no overflow, no panic,
// no empty body sent.
func TestHugeReplayLimit(t *testing.T) {
	t.Parallel()
	for _, length := range []int64{-1, 13} {
		up := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{MaxReplayBytes: math.MaxInt64, Backoff: backoff.Constant(0)}}
		req, _ := http.NewRequest(http.MethodPut, site, io.NopCloser(strings.NewReader("precious data")))
		req.ContentLength = length
		var resp *http.Response
		var err error
		require.NotPanics(t, func() { resp, err = tr.RoundTrip(req) })
		require.NoError(t, err)
		resp.Body.Close()
		reqs := up.Requests()
		require.Len(t, reqs, 2)
		for _, r := range reqs {
			assert.Equal(t, "precious data", string(r.Body), "ContentLength %d", length)
		}
	}
	// A declared length far past the body sizes nothing in advance.
	tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(200)), Policy: httpretry.Policy{MaxReplayBytes: math.MaxInt64}}
	req, _ := http.NewRequest(http.MethodPut, site, io.NopCloser(strings.NewReader("short")))
	req.ContentLength = 1 << 50
	_, err := tr.RoundTrip(req)
	assert.ErrorIs(t, err, httpretry.ErrRequestBody, "ContentLength does not match the body")
}

// deafBody trickles a byte every 50 ms, whatever the request's context,
// until it is closed: a custom Base's body that does not follow the context.
type deafBody struct {
	closed atomic.Bool
	closes atomic.Int32
}

func (b *deafBody) Read(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	if b.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	p[0] = 'x'
	return 1, nil
}

func (b *deafBody) Close() error { b.closed.Store(true); b.closes.Add(1); return nil }

// TestDrainEndsWithTheContext: the drain of a discarded body that ignores
// the request's context stops when the caller's context does, not 250 ms
// later.
func TestDrainEndsWithTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		body := &deafBody{}
		base := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Body: body}, nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := tr.RoundTrip(get(t, ctx))
		require.Error(t, err)
		assert.LessOrEqual(t, time.Since(start), 150*time.Millisecond, "returned with the deadline, the read in progress included")
		assert.EqualValues(t, 1, body.closes.Load())
		// The read in progress was abandoned to the drain's goroutine,
		// which ends when it returns.
		time.Sleep(time.Second)
	})
}

// rwBody is the body of a 101 Switching Protocols response: the upgraded
// connection, readable and writable.
type rwBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *rwBody) Write(p []byte) (int, error) { return len(p), nil }
func (b *rwBody) Close() error                { b.closes.Add(1); return nil }

// TestSwitchedProtocolIsNeverKeptInMemory: a 101 that a classifier makes
// worth retrying is drained like any discarded response, but if the retry
// is then called off, no in-memory copy stands in for it: its body was the
// upgraded connection, now gone. The caller gets the error, never a 101
// whose body cannot be written to.
func TestSwitchedProtocolIsNeverKeptInMemory(t *testing.T) {
	t.Parallel()
	body := &rwBody{Reader: strings.NewReader("hello")}
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: body, Request: req}, nil
	})
	tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
		Backoff: backoff.Constant(0),
		Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
			if resp != nil && resp.StatusCode == http.StatusSwitchingProtocols {
				return httpretry.ClassTransient
			}
			return httpretry.ClassDefault
		},
		PrepareRetry: func(httpretry.Attempt, *http.Request) error { return errBoom },
	}}
	resp, err := tr.RoundTrip(get(t, t.Context()))
	if resp != nil {
		_, writable := resp.Body.(io.Writer)
		resp.Body.Close()
		t.Fatalf("a 101 was returned after its body was drained (writable: %v)", writable)
	}
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, httpretry.StopRefused, re.Stop)
	assert.Equal(t, http.StatusSwitchingProtocols, re.LastStatus)
	assert.EqualValues(t, 1, body.closes.Load())
}

// TestCallerBodyClosedWhenBaseDropsIt: net/http's HTTP/2 transport, when
// it sends a request again on another connection, takes a copy from
// GetBody and does not always close the body it replaced. The caller's
// body is closed all the same once the call is over, exactly once, whether
// it is copied as sent, rewound with Seek, or has a GetBody of its own.
func TestCallerBodyClosedWhenBaseDropsIt(t *testing.T) {
	t.Parallel()
	bodies := map[string]func() (io.ReadCloser, func() int){
		"copied as sent": func() (io.ReadCloser, func() int) {
			b := httpretrytest.NewBody("payload")
			return b, b.Closes
		},
		"seekable": func() (io.ReadCloser, func() int) {
			b := &seekCloser{ReadSeeker: strings.NewReader("payload")}
			return b, func() int { return int(b.closes.Load()) }
		},
	}
	for name, mk := range bodies {
		t.Run(name, func(t *testing.T) {
			body, closes := mk()
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				copy, err := req.GetBody() // the copy net/http sends instead
				if err != nil {
					return nil, err
				}
				b, err := io.ReadAll(copy)
				copy.Close()
				if err != nil || string(b) != "payload" {
					return nil, fmt.Errorf("copy %q, %v", b, err)
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil // req.Body never closed
			})
			req, _ := http.NewRequest(http.MethodPut, site, body)
			resp, err := (&httpretry.Transport{Base: base}).RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 1, closes())
		})
	}
}

// seekCloser is an io.ReadSeekCloser that counts its closes.
type seekCloser struct {
	io.ReadSeeker
	closes atomic.Int32
}

func (s *seekCloser) Close() error { s.closes.Add(1); return nil }
