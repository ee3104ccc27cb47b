package httpretry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
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
		{name: "opaque reader under the limit is buffered", body: opaque(payload), attempts: 3, wantGetBody: true},
		{name: "opaque reader at the limit is buffered", body: opaque(payload), limit: 1000, attempts: 3, wantGetBody: true},
		{name: "opaque reader over the limit is sent once", body: opaque(payload), limit: 999, attempts: 1},
		{name: "negative limit never buffers", body: opaque(payload), limit: -1, attempts: 1},
		{name: "negative limit still uses GetBody", body: func() io.Reader { return strings.NewReader(payload) },
			getBody: true, limit: -1, attempts: 3, wantGetBody: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := newFake(t, status(503), status(503), status(200))
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
				seen := fake.attempts()
				require.Len(t, seen, tc.attempts)
				for _, s := range seen {
					assert.Equal(t, payload, s.body, "every attempt sends the whole body")
					assert.Equal(t, tc.wantGetBody, s.getBody)
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
			fake := newFake(t, status(503), status(200))
			body := newCountingBody("hello")
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, site, body)
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{MaxReplayBytes: limit}}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.EqualValues(t, 1, body.closed.Load(), "limit %d", limit)
			assert.Equal(t, "hello", fake.attempts()[0].body)
		})
	}
}

func TestBodyErrors(t *testing.T) {
	t.Parallel()
	t.Run("a body that errors half-way while buffering", func(t *testing.T) {
		fake := newFake(t, status(200))
		body := newCountingBody("hello world")
		body.failAt, body.failErr = 5, errBoom
		req, _ := http.NewRequest(http.MethodPost, site, body)
		resp, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, httpretry.ErrRequestBody)
		assert.ErrorIs(t, err, errBoom)
		assert.Empty(t, fake.attempts(), "nothing half-read is sent")
		assert.EqualValues(t, 1, body.closed.Load())
	})
	t.Run("a Content-Length that lies", func(t *testing.T) {
		for _, n := range []int64{3, 50} {
			fake := newFake(t, status(200))
			body := newCountingBody("0123456789")
			req, _ := http.NewRequest(http.MethodPut, site, body)
			req.ContentLength = n
			_, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
			assert.ErrorIs(t, err, httpretry.ErrRequestBody)
			assert.ErrorContains(t, err, "ContentLength")
			assert.Empty(t, fake.attempts())
			assert.EqualValues(t, 1, body.closed.Load())
		}
	})
	t.Run("GetBody that errors before a retry returns the response in hand", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := newFake(t, status(503), status(200))
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, site, strings.NewReader("x"))
			req.GetBody = func() (io.ReadCloser, error) { return nil, errBoom }
			resp, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
			assert.Equal(t, "Service Unavailable", readAll(t, resp.Body))
			resp.Body.Close()
			assert.Len(t, fake.attempts(), 1)
		})
	})
	t.Run("GetBody that errors after a transport error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := newFake(t, failWith(io.EOF))
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
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			n, err := io.Copy(io.Discard, req.Body)
			got = n
			req.Body.Close()
			return &http.Response{StatusCode: 200, Body: http.NoBody}, err
		})
		body := &countingReader{n: size}
		req, _ := http.NewRequest(http.MethodPost, site, body)
		req.ContentLength = -1
		resp, err := (&httpretry.Transport{Base: base}).RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.EqualValues(t, size, got)
		assert.True(t, body.closed)
	})
}

// countingReader yields n zero bytes.
type countingReader struct {
	n      int64
	closed bool
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n)
	clear(p[:k])
	r.n -= k
	return int(k), nil
}

func (r *countingReader) Close() error { r.closed = true; return nil }

func TestDiscardedBodiesAreDrainedBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var huge []*countingReader
		calls := 0
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			if calls == 3 {
				return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
			}
			r := &countingReader{n: 1 << 30} // a 1 GiB error page
			huge = append(huge, r)
			return &http.Response{StatusCode: 503, Body: r}, nil
		})
		resp, err := (&httpretry.Transport{Base: base}).RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, huge, 2)
		for _, r := range huge {
			assert.True(t, r.closed)
			assert.GreaterOrEqual(t, r.n, int64(1<<30-64<<10), "at most 64 KiB drained")
		}
	})
}
