package httpretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
)

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// step is one scripted outcome of the fake Base: a response with a status,
// headers and body, or an error.
type step struct {
	status int
	header http.Header
	body   string
	err    error
}

func status(code int) step    { return step{status: code, body: http.StatusText(code)} }
func failWith(err error) step { return step{err: err} }
func retryAfter(code int, v string) step {
	return step{status: code, header: http.Header{"Retry-After": {v}}}
}

// seen is what the fake Base observed of one attempt.
type seen struct {
	method  string
	header  http.Header
	body    string
	attempt int
	at      time.Time
	getBody bool
}

// fakeBase plays a script of outcomes, one per attempt; past the end it
// repeats the last step. It records every attempt and every response body
// it hands out, so tests can check that each was closed.
type fakeBase struct {
	t      *testing.T
	mu     sync.Mutex
	script []step
	seen   []seen
	bodies []*trackedBody
}

func newFake(t *testing.T, script ...step) *fakeBase {
	return &fakeBase{t: t, script: script}
}

func (f *fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		if err != nil {
			f.t.Errorf("reading attempt body: %v", err)
		}
		req.Body.Close()
	}
	n, _ := httpretry.AttemptFromContext(req.Context())
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, seen{
		method:  req.Method,
		header:  req.Header.Clone(),
		body:    string(body),
		attempt: n,
		at:      time.Now(),
		getBody: req.GetBody != nil,
	})
	s := f.script[min(len(f.seen), len(f.script))-1]
	if s.err != nil {
		return nil, s.err
	}
	tb := &trackedBody{Reader: strings.NewReader(s.body)}
	f.bodies = append(f.bodies, tb)
	h := s.header
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		StatusCode: s.status, Status: http.StatusText(s.status),
		Header: h, Body: tb, Request: req, ContentLength: int64(len(s.body)),
	}, nil
}

func (f *fakeBase) attempts() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

// discardedClosed reports whether every response body except the last was
// closed, and the last was left open.
func (f *fakeBase) discardedClosed(t *testing.T, lastReturned bool) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, b := range f.bodies {
		if lastReturned && i == len(f.bodies)-1 {
			if b.closed.Load() != 0 {
				t.Errorf("the returned response body was closed by the transport")
			}
			continue
		}
		if b.closed.Load() != 1 {
			t.Errorf("discarded body %d closed %d times, want 1", i, b.closed.Load())
		}
	}
}

// trackedBody counts Close calls.
type trackedBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *trackedBody) Close() error { b.closed.Add(1); return nil }

// countingBody is a request body that counts Close calls and can fail
// after some bytes.
type countingBody struct {
	r       io.Reader
	failAt  int
	read    int
	closed  atomic.Int32
	failErr error
}

func newCountingBody(s string) *countingBody {
	return &countingBody{r: strings.NewReader(s), failAt: -1}
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.failAt >= 0 && b.read >= b.failAt {
		return 0, b.failErr
	}
	if b.failAt >= 0 && len(p) > b.failAt-b.read {
		p = p[:b.failAt-b.read]
	}
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { b.closed.Add(1); return nil }

var errBoom = errors.New("boom")

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatalf("read: %v", err)
	}
	return buf.String()
}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}
