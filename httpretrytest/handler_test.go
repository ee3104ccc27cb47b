package httpretrytest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestHandlerSeesAServerRequest(t *testing.T) {
	t.Parallel()
	var seen *http.Request
	var body string
	tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.Header().Set("X-Seen", r.Method)
		io.WriteString(w, "<html><body>hi</body></html>")
	})}
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/things?q=1", io.NopCloser(strings.NewReader("payload")))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "<html><body>hi</body></html>", readBody(t, resp))
	resp.Body.Close()

	assert.Equal(t, "/v1/things?q=1", seen.RequestURI)
	assert.Equal(t, "/v1/things", seen.URL.Path)
	assert.Empty(t, seen.URL.Host, "a server-side URL has no host")
	assert.Equal(t, "api.example.com", seen.Host)
	assert.Equal(t, "192.0.2.1:1234", seen.RemoteAddr)
	assert.EqualValues(t, -1, seen.ContentLength, "a body of unknown length")
	assert.Equal(t, "payload", body)

	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "200 OK", resp.Status)
	assert.Equal(t, "POST", resp.Header.Get("X-Seen"))
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"), "sniffed, as net/http does")
	assert.EqualValues(t, -1, resp.ContentLength)
	assert.Same(t, req, resp.Request)

	reqs := tr.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "payload", string(reqs[0].Body))
	assert.Equal(t, "k1", reqs[0].Key)
	assert.Equal(t, 200, reqs[0].Status)
	assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
}

func TestHandlerStreamsBothWays(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// The handler answers each line of the upload as it arrives: the
		// caller reads the first answer before it sends the second line.
		tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sc := bufio.NewScanner(r.Body)
			for sc.Scan() {
				fmt.Fprintf(w, "got %s\n", sc.Text())
			}
		})}
		upload, send := io.Pipe()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, api+"/echo", upload)
		go io.WriteString(send, "one\n")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		lines := bufio.NewReader(resp.Body)
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "got one\n", line)

		go func() { io.WriteString(send, "two\n"); send.Close() }()
		rest, err := io.ReadAll(lines)
		require.NoError(t, err)
		assert.Equal(t, "got two\n", string(rest))
		resp.Body.Close()
		assert.Equal(t, "one\ntwo\n", string(tr.Requests()[0].Body))
	})
}

func TestHandlerWritingSlowlyIsASlowBody(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, c := range "abc" {
				time.Sleep(time.Second)
				fmt.Fprintf(w, "%c", c)
			}
		})}
		start := time.Now()
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		assert.Equal(t, time.Second, time.Since(start), "the head comes with the first write")
		var arrivals []time.Duration
		buf := make([]byte, 8)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				arrivals = append(arrivals, time.Since(start))
			}
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		resp.Body.Close()
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, arrivals)
	})
}

func TestHandlerContextFollowsTheRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var handlerErr atomic.Value
		tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			handlerErr.Store(r.Context().Err())
		})}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		_, err := tr.RoundTrip(newReq(t, ctx, http.MethodGet, "/", ""))
		assert.ErrorIs(t, err, context.Canceled)
		synctest.Wait()
		assert.Equal(t, context.Canceled, handlerErr.Load(), "the cancellation reached the handler")
		assert.ErrorIs(t, tr.Requests()[0].Err, context.Canceled)
	})
}

func TestHandlerSeesTheCallerHangUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var writeErr, ctxErr atomic.Value
		tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for {
				if _, err := io.WriteString(w, "tick\n"); err != nil {
					writeErr.Store(err)
					break
				}
			}
			<-r.Context().Done()
			ctxErr.Store(r.Context().Err())
		})}
		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/", ""))
		require.NoError(t, err)
		_, err = resp.Body.Read(make([]byte, 5))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Equal(t, io.ErrClosedPipe, writeErr.Load(), "writes fail once the caller has closed the body")
		assert.Equal(t, context.Canceled, ctxErr.Load())
	})
}

func TestHandlerReadAfterCancelFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})}
		ctx, cancel := context.WithCancelCause(t.Context())
		resp, err := tr.RoundTrip(newReq(t, ctx, http.MethodGet, "/", ""))
		require.NoError(t, err)
		time.AfterFunc(time.Second, func() { cancel(errBoom) })
		_, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, errBoom, "a read blocked when the request is cancelled returns the cause")
		resp.Body.Close()
	})
}

func TestHandlerResponsesWithoutBody(t *testing.T) {
	t.Parallel()
	var writeErr error
	tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/nothing":
		case "/no-content":
			w.WriteHeader(http.StatusNoContent)
			_, writeErr = w.Write([]byte("x"))
		case "/length":
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "sorry")
		default:
			w.WriteHeader(http.StatusContinue) // informational: dropped
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusTeapot) // superfluous: ignored
			io.WriteString(w, "body")
		}
	})}
	for _, tc := range []struct {
		method, path string
		status       int
		length       int64
		body         string
	}{
		{"GET", "/nothing", 200, 0, ""},
		{"GET", "/no-content", 204, 0, ""},
		{"GET", "/length", 503, 5, "sorry"},
		{"GET", "/other", 202, -1, "body"},
		{"HEAD", "/other", 202, -1, ""},
	} {
		resp, err := tr.RoundTrip(newReq(t, context.Background(), tc.method, tc.path, ""))
		require.NoError(t, err)
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
		assert.Equal(t, tc.length, resp.ContentLength, tc.path)
		assert.Equal(t, tc.body, readBody(t, resp), tc.method+" "+tc.path)
		resp.Body.Close()
	}
	assert.Equal(t, http.ErrBodyNotAllowed, writeErr)
}

func TestHandlerAbort(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/late" {
				io.WriteString(w, "partial")
			}
			panic(http.ErrAbortHandler)
		})}
		_, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/early", ""))
		assert.ErrorIs(t, err, httpretrytest.ErrHandlerAborted)

		resp, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodGet, "/late", ""))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		assert.Equal(t, "partial", string(b))
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		resp.Body.Close()
	})
}

func TestHandlerCancelledBeforeTheStart(t *testing.T) {
	t.Parallel()
	var called atomic.Bool
	tr := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Store(true) })}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := httpretrytest.NewBody("x")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api, body)
	_, err := tr.RoundTrip(req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called.Load())
	assert.Equal(t, 1, body.Closes())
}

func TestHandlerUnderRetriesTakesNoRealTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		api := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if calls.Add(1) == 1 {
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "done")
		})}
		client := &http.Client{Transport: &httpretry.Transport{Base: api}}
		start := time.Now()
		resp, err := client.Post("https://api.example.com/jobs", "text/plain", strings.NewReader("job"))
		require.NoError(t, err)
		assert.Equal(t, "done", readBody(t, resp))
		resp.Body.Close()
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Second, "Retry-After obeyed, on the fake clock")
		reqs := api.Requests()
		assert.True(t, httpretrytest.CheckAttempts(t, reqs, 2))
		assert.True(t, httpretrytest.CheckSameKey(t, reqs))
		assert.True(t, httpretrytest.CheckSameBody(t, reqs))
		assert.True(t, httpretrytest.CheckBodiesClosed(t, reqs))
	})
}
