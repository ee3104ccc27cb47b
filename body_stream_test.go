package httpretry_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// A response that is a stream (an event stream, a watch, a long poll) is
// handed to the caller with its header, as net/http does, whatever
// ReadBodyBytes says: the read ahead never waits for events. (RoundTrip
// held a stream that had sent one event until ReadBodyBytes of them had
// come; with an AttemptTimeout the GET timed out and was sent again, until
// its attempts ran out.)
func TestReadAheadDoesNotHoldAStream(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
	}{
		{"event stream", "text/event-stream"},
		{"kubernetes watch", "application/json;stream=watch"},
		{"ndjson", "application/x-ndjson"},
		{"chunked, no stream type", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				io.WriteString(w, "data: one\n\n")
				w.(http.Flusher).Flush()
				select { // the next event comes much later
				case <-release:
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			var attempts int
			rt := &httpretry.Transport{Base: srv.Client().Transport, Policy: httpretry.Policy{
				ReadBodyBytes: 64 << 10, AttemptTimeout: 2 * time.Second, Backoff: backoff.Constant(0)},
				OnCall: func(c httpretry.Call) { attempts = c.Attempts }}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			began := time.Now()
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Less(t, time.Since(began), time.Second, "the header waited for events")
			assert.Equal(t, 1, attempts, "one subscription")
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, "data: one\n", line, "the first event reaches the caller")
		})
	}
}

// A body of unknown length that arrives at once is still read ahead
// whole, and Classify sees it; what pauses is read for at most the read
// ahead's window, and the rest streams, as the rest of a larger body does.
func TestReadAheadOfAnUnknownLength(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			pr, pw := io.Pipe()
			go func() {
				io.WriteString(pw, `{"status":`)
				if req.URL.Path == "/slow" {
					time.Sleep(time.Minute)
				}
				io.WriteString(pw, `"ok"}`)
				pw.Close()
			}()
			return &http.Response{StatusCode: 200, ContentLength: -1, Header: http.Header{"Content-Type": {"application/json"}},
				Body: pr, Request: req}, nil
		})
		rt := &httpretry.Transport{Base: base, Policy: httpretry.Policy{ReadBodyBytes: 1 << 10,
			Classify: classifyByBody(&seen)}}
		for _, path := range []string{"/fast", "/slow"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://api.test"+path, nil)
			began := time.Now()
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			waited := time.Since(began)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, `{"status":"ok"}`, string(body), path)
			assert.LessOrEqual(t, waited, time.Second, "%s: RoundTrip waited %v for the body", path, waited)
		}
		require.Len(t, seen, 2)
		assert.Equal(t, `{"status":"ok"}`, seen[0], "a body that arrives at once is classified whole")
		assert.True(t, strings.HasPrefix(seen[1], `{"status":`) && !strings.Contains(seen[1], "ok"),
			"a body that pauses is classified on what came: %q", seen[1])
	})
}

// The read ahead of a body of unknown length runs on a goroutine of its
// own: it ends when the caller closes the body unread, and a panic of the
// body's Read reaches the goroutine that reads the body, never another.
func TestReadAheadWindowReleasesItsGoroutine(t *testing.T) {
	t.Parallel()
	pausing := func(panicAt int) http.RoundTripper {
		return httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, ContentLength: -1, Header: http.Header{},
				Body: &pausingBody{ctx: req.Context(), panicAt: panicAt}, Request: req}, nil
		})
	}
	t.Run("closed unread", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := &httpretry.Transport{Base: pausing(-1), Policy: httpretry.Policy{ReadBodyBytes: 1 << 10}}
			resp, err := rt.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close() // the bubble fails if the read's goroutine is left
		})
	})
	t.Run("a panic after the window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := &httpretry.Transport{Base: pausing(2), Policy: httpretry.Policy{ReadBodyBytes: 1 << 10}}
			resp, err := rt.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.PanicsWithValue(t, "body read", func() { io.ReadAll(resp.Body) })
		})
	})
}

// pausingBody sends one byte, then waits a minute (or until its context
// ends) before each further one; its Read number panicAt panics after
// its wait.
type pausingBody struct {
	ctx     context.Context
	reads   int
	panicAt int
}

func (b *pausingBody) Read(p []byte) (int, error) {
	b.reads++
	if b.reads > 1 {
		select {
		case <-time.After(time.Minute):
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	}
	if b.reads == b.panicAt {
		panic("body read")
	}
	p[0] = 'x'
	return 1, nil
}

func (b *pausingBody) Close() error { return nil }
