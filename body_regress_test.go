package httpretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// Defects of the body replay and of panics that TestInvariants found, each
// reproduced through the public API.

// blockingBody is a request body whose Read blocks until it is closed, as
// a body read from a network source does: only Close ends a Read that
// waits. It can seek, as a remote file's reader can.
type blockingBody struct {
	closed chan struct{}
	once   sync.Once
}

func newBlockingBody() *blockingBody { return &blockingBody{closed: make(chan struct{})} }

func (b *blockingBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *blockingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

func (b *blockingBody) Seek(offset int64, whence int) (int64, error) { return 0, nil }

// TestAttemptBodyCloseEndsABlockedRead (seed 14 of TestInvariants, and
// every scenario where an attempt's context ends while Base reads a slow
// GetBody body): closing an attempt's request body must end a Read of it
// that is in progress, as net/http relies on — its HTTP/1 client closes
// the body on the RoundTrip goroutine after a failed attempt while its
// write loop may still be inside a Read, and its HTTP/2 client closes it
// to abort a write. In the GetBody and Seek modes the Transport's
// sentBody.Close takes the stream's mutex, which stream.read holds across
// the caller's Read, so Close waits for the Read to return, and the Read
// waits for Close: RoundTrip never returns.
func TestAttemptBodyCloseEndsABlockedRead(t *testing.T) {
	// The copy mode, which ends such a Read by closing the caller's body,
	// is the control.
	for _, mode := range []string{"GetBody", "Seek", "copy"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				body := newBlockingBody()
				req, err := http.NewRequest(http.MethodPut, "http://api.example.com/upload", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Body, req.ContentLength = body, 5
				switch mode {
				case "GetBody":
					req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
				case "copy":
					req.Body = struct{ io.ReadCloser }{body} // no Seek
				}
				closed := make(chan struct{})
				base := httpretrytest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
					reading := make(chan struct{})
					go func() {
						close(reading)
						io.Copy(io.Discard, r.Body) // the write loop
					}()
					<-reading
					time.Sleep(10 * time.Millisecond) // the Read has begun
					go func() {
						r.Body.Close() // the attempt failed: net/http closes the body
						close(closed)
					}()
					select {
					case <-closed:
					case <-time.After(time.Second):
						t.Errorf("%s: closing the attempt's request body did not end the Read in progress: still blocked after 1s", mode)
						body.Close() // let the test end
						<-closed
					}
					return nil, errors.New("connection closed")
				})
				tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 2}}
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				body.Close()
			})
		})
	}
}

// stuckSeeker tells where it is, but cannot move: a stream that is an
// io.Seeker by type only, or a file whose seek fails.
type stuckSeeker struct{ *strings.Reader }

func (s stuckSeeker) Seek(offset int64, whence int) (int64, error) {
	cur, _ := s.Reader.Seek(0, io.SeekCurrent)
	if whence == io.SeekCurrent && offset == 0 || whence == io.SeekStart && offset == cur {
		return cur, nil // where it is already
	}
	return 0, errors.New("cannot seek")
}

func (stuckSeeker) Close() error { return nil }

// TestRetryWhoseBodyCannotSeekIsRefused (seed 4 of TestInvariants): a
// body that cannot be had again for a retry refuses the retry when it is
// about to be sent (StopNotReplayable), as a GetBody that fails does, and
// the caller gets the response in hand. For a Seek that fails, the
// Transport sends the retry anyway: the Seek happens at the retry's first
// Read, inside Base, so the server gets a request whose body breaks after
// its header, and the caller gets an ErrRequestBody error instead of the
// 503 it had.
func TestRetryWhoseBodyCannotSeekIsRefused(t *testing.T) {
	var attempts int
	base := httpretrytest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		attempts++
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			r.Body.Close()
			return nil, err
		}
		r.Body.Close()
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
	})
	tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0)}}
	req, err := http.NewRequest(http.MethodPut, "http://api.example.com/upload", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Body, req.ContentLength = stuckSeeker{strings.NewReader("hello")}, 5
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("got error %v after %d attempts, want the 503 in hand after 1", err, attempts)
	}
	resp.Body.Close()
	if attempts != 1 || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("got %d after %d attempts, want the 503 after 1", resp.StatusCode, attempts)
	}
}

// panicBody is a response body whose Read, or Close, panics.
type panicBody struct{ read, close bool }

func (b panicBody) Read(p []byte) (int, error) {
	if b.read {
		panic("body Read panics")
	}
	return 0, io.EOF
}

func (b panicBody) Close() error {
	if b.close {
		panic("body Close panics")
	}
	return nil
}

// TestPanicInADiscardedBodyReachesTheCaller (seed 300 of TestInvariants,
// and every scenario whose discarded response body panics in Read): a
// panic in Base reaches the caller's goroutine, never another, and a
// response body is Base's code. The Transport drains a discarded response
// on a goroutine of its own, so that its bounds hold whatever the body
// does; a Read that panics there is raised again on the caller's.
func TestPanicInADiscardedBodyReachesTheCaller(t *testing.T) {
	base := httpretrytest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: panicBody{read: true}, Request: r}, nil
	})
	tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0)}}
	req, err := http.NewRequest(http.MethodGet, "http://api.example.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != "body Read panics" {
			t.Errorf("recovered %v on the caller's goroutine, want the body's panic", p)
		}
	}()
	tr.RoundTrip(req)
	t.Error("RoundTrip returned: want the body's panic")
}

// TestPanicOfAnAbandonedHedgeIsLogged (seed 6954 of TestInvariants): the
// response of a hedged attempt that lost is closed by the round's reaper
// once the call has returned; a Close that panics there has no caller left
// to reach, and is logged at Error instead of ending the process.
func TestPanicOfAnAbandonedHedgeIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log bytes.Buffer
		var mu sync.Mutex
		base := httpretrytest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			if n, _ := httpretry.AttemptFromContext(r.Context()); n == 1 {
				<-r.Context().Done() // lost: answers once cancelled
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: panicBody{close: true}, Request: r}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		tr := &httpretry.Transport{Base: base, Logger: slog.New(slog.NewTextHandler(&lockedWriter{&mu, &log}, nil)),
			Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: 10 * time.Millisecond}}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		assert.Contains(t, log.String(), "panicked on an abandoned attempt")
		assert.Contains(t, log.String(), "body Close panics")
	})
}

// closeCount is a request body that counts its closes.
type closeCount struct {
	io.Reader
	mu     sync.Mutex
	closes int
}

func (b *closeCount) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes++
	return nil
}

// TestPanicInBaseClosesTheCallersBody (seed 1534 of TestInvariants, and
// every scenario whose Base panics holding its attempt's body): RoundTrip
// always closes req.Body, and releases what an attempt held on every path,
// panics included. When the Transport keeps the caller's body to replay
// it (a copy, GetBody, Seek), it closes the caller's body only once every
// attempt's reader of it is closed; a Base that panicked never closes its
// own, so the caller's body is never closed: a live stream's writer then
// waits for ever.
func TestPanicInBaseClosesTheCallersBody(t *testing.T) {
	body := &closeCount{Reader: strings.NewReader("hello")}
	base := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { panic("base panics") })
	tr := &httpretry.Transport{Base: base}
	req, err := http.NewRequest(http.MethodPut, "http://api.example.com/upload", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Body, req.ContentLength = body, 5
	func() {
		defer func() {
			if p := recover(); p != "base panics" {
				t.Errorf("recovered %v, want the panic of Base", p)
			}
		}()
		tr.RoundTrip(req)
	}()
	body.mu.Lock()
	defer body.mu.Unlock()
	if body.closes != 1 {
		t.Errorf("the caller's body was closed %d times after Base panicked, want 1", body.closes)
	}
}

// traceAll calls the hooks net/http calls for a request that is answered.
func traceAll(ctx context.Context) {
	tr := httptrace.ContextClientTrace(ctx)
	if tr == nil {
		return
	}
	if tr.GetConn != nil {
		tr.GetConn("auth.example.com:443")
	}
	if tr.WroteHeaders != nil {
		tr.WroteHeaders()
	}
	if tr.GotFirstResponseByte != nil {
		tr.GotFirstResponseByte()
	}
}

// TestProgressIsTheAttemptsOwn (seed 10916 of TestInvariants): an error
// of a type the rules do not know is judged by how far net/http took the
// attempt, as the httptrace hooks of its context report it. A request
// made under the attempt's context before the attempt is sent — a token
// refresh in PrepareRetry written with next.Context() — calls the same
// hooks, and its progress is counted as the attempt's: an attempt that
// then got a connection and wrote nothing on it is judged transient
// instead of not processed, so an unkeyed POST is not retried; one that
// never reached a connection (a signer's permanent error) can be judged
// transient, and retried, when the refresh got no answer.
func TestProgressIsTheAttemptsOwn(t *testing.T) {
	var n int
	base := httpretrytest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if n == 1 {
			return &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		}
		if tr := httptrace.ContextClientTrace(r.Context()); tr != nil && n == 2 {
			tr.GetConn(r.URL.Host) // a connection, found unusable: nothing written
		}
		if n == 2 {
			return nil, errors.New("connection unusable")
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var classes []httpretry.Class
	tr := &httpretry.Transport{Base: base,
		OnAttempt: func(a httpretry.Attempt) { classes = append(classes, a.Class) },
		Policy: httpretry.Policy{MaxAttempts: 3, Backoff: backoff.Constant(0), Keys: httpretry.KeyPolicy{Disabled: true},
			Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
				if resp != nil && resp.StatusCode == http.StatusUnauthorized {
					return httpretry.ClassNotProcessed // the token was refused: nothing was done
				}
				return httpretry.ClassDefault
			},
			PrepareRetry: func(prev httpretry.Attempt, next *http.Request) error {
				traceAll(next.Context()) // a token refresh through net/http, under the retry's context
				return nil
			}}}
	req, err := http.NewRequest(http.MethodPost, "http://api.example.com/charge", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	if len(classes) < 2 || classes[1] != httpretry.ClassNotProcessed {
		t.Errorf("attempt 2 got a connection and wrote nothing on it: classes %v, want attempt 2 not-processed", classes)
	}
}

// TestGetBodyOfAnAttemptLeavesItsBodyWhole (seed 4376 of TestInvariants):
// every attempt request carries a GetBody, so that a request signer in
// Base can hash the body before the attempt is sent (AWS SigV4 does). For
// a body copied as Base reads it (no GetBody, not an io.Seeker) of unknown
// length and larger than MaxReplayBytes, the signer's copy reads the
// caller's body to its end, the copy outgrows MaxReplayBytes and is
// dropped, and the attempt's own body, which has not been read yet, then
// fails at once with "the body is larger than MaxReplayBytes": the first
// attempt of a call that would go through without the signer's read
// fails with ErrRequestBody. The copy that ran ahead, not the attempt's
// own body, is the one that should fail (or GetBody should not be offered
// for a body the copy cannot hold).
func TestGetBodyOfAnAttemptLeavesItsBodyWhole(t *testing.T) {
	payload := strings.Repeat("x", 40)
	var sent string
	base := httpretrytest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.GetBody != nil { // the signer
			rc, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			io.Copy(io.Discard, rc)
			rc.Close()
		}
		data, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		sent = string(data)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxReplayBytes: 16}}
	req, err := http.NewRequest(http.MethodPut, "http://api.example.com/upload", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Body = io.NopCloser(strings.NewReader(payload)) // no GetBody, not a Seeker, length unknown
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("the attempt failed once the signer had read its GetBody: %v", err)
	}
	resp.Body.Close()
	if sent != payload {
		t.Errorf("Base sent %q, want %q", sent, payload)
	}
}
