package httpretry_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// The fakes TestInvariants needs beyond package httpretrytest: the errors
// of a network and of TLS as the standard library types them, request
// bodies that are slow or break, and the upstream that wraps a
// httpretrytest.Script to read request bodies as net/http does.

// errKind is one kind of error a Base returns, with the class the
// documented rules give it (classUnknown: the rule for unknown errors).
type errKind struct {
	name  string
	class httpretry.Class
	make  func(rawURL string) error
}

// classUnknown marks an error kind that the built-in rules do not know:
// transient when the attempt reached net/http's client, fatal otherwise.
const classUnknown httpretry.Class = -100

// h2StreamError has the shape of net/http's and x/net's HTTP/2 stream
// error; h2GoAway that of a GOAWAY.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
}

func (e h2StreamError) Error() string {
	return fmt.Sprintf("stream error: stream ID %d; code %d", e.StreamID, e.Code)
}

type h2GoAway struct {
	LastStreamID uint32
	ErrCode      uint32
	DebugData    string
}

func (e h2GoAway) Error() string { return "http2: server sent GOAWAY" }

// embedsNilStreamErr promotes StreamID and Code through a nil pointer.
type embedsNilStreamErr struct{ *h2StreamError }

func (embedsNilStreamErr) Error() string { return "embeds a nil stream error" }

// nilPtrError is returned as a typed nil pointer.
type nilPtrError struct{ msg string }

func (e *nilPtrError) Error() string { return e.msg }

// panickyError panics in Error.
type panickyError struct{}

func (panickyError) Error() string { panic("Error method panics") }

// uncomparableError cannot be compared with ==.
type uncomparableError struct{ parts []string }

func (e uncomparableError) Error() string { return strings.Join(e.parts, " ") }

var errKinds = []errKind{
	{"reset", httpretry.ClassTransient, func(string) error { return httpretrytest.ConnReset() }},
	{"refused", httpretry.ClassNotProcessed, func(string) error { return httpretrytest.DialRefused() }},
	{"timeout", httpretry.ClassTransient, func(string) error { return httpretrytest.Timeout() }},
	{"dns-temporary", httpretry.ClassNotProcessed, func(string) error {
		return &net.DNSError{Err: "server misbehaving", Name: "api.example.com", IsTemporary: true}
	}},
	{"dns-not-found", httpretry.ClassFatal, func(string) error {
		return &net.DNSError{Err: "no such host", Name: "api.example.com", IsNotFound: true}
	}},
	{"tls-certificate", httpretry.ClassFatal, func(string) error {
		return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	}},
	{"tls-alert", httpretry.ClassFatal, func(string) error { return tls.AlertError(40) }},
	{"tls-remote-alert", httpretry.ClassFatal, func(string) error {
		return &net.OpError{Op: "remote error", Net: "tcp", Err: errors.New("tls: certificate required")}
	}},
	{"h2-refused-stream", httpretry.ClassNotProcessed, func(string) error { return h2StreamError{StreamID: 3, Code: 7} }},
	{"h2-internal", httpretry.ClassTransient, func(string) error { return &h2StreamError{StreamID: 5, Code: 2} }},
	{"h2-goaway", httpretry.ClassTransient, func(string) error { return h2GoAway{LastStreamID: 1, ErrCode: 0} }},
	{"eof", httpretry.ClassTransient, func(string) error { return io.EOF }},
	{"unexpected-eof", httpretry.ClassTransient, func(string) error { return io.ErrUnexpectedEOF }},
	{"url-error", httpretry.ClassTransient, func(u string) error {
		return &url.Error{Op: "Post", URL: u, Err: httpretrytest.ConnReset()}
	}},
	{"untyped", classUnknown, func(string) error { return errors.New("signer: token expired") }},
	{"canceled-below", httpretry.ClassFatal, func(string) error { return fmt.Errorf("layer below: %w", context.Canceled) }},
	{"breaker-below", httpretry.ClassFatal, func(string) error { return fmt.Errorf("layer below: %w", httpretry.ErrCircuitOpen) }},
	{"embeds-nil", classUnknown, func(string) error { return embedsNilStreamErr{} }},
	{"nil-pointer", classUnknown, func(string) error { return (*nilPtrError)(nil) }},
	{"panicky", classUnknown, func(string) error { return panickyError{} }},
	{"uncomparable", classUnknown, func(string) error { return uncomparableError{[]string{"a", "b"}} }},
}

// errKindNamed returns the index of the kind called name.
func errKindNamed(name string) int {
	for i, k := range errKinds {
		if k.name == name {
			return i
		}
	}
	panic("no error kind " + name)
}

// reqBody is a request body that counts its closes and can be slow or
// break after some bytes. Close ends a pausing Read, as a pipe's does.
type reqBody struct {
	mu     sync.Mutex
	data   []byte
	off    int
	failAt int // -1: never
	chunk  int // bytes per Read when slow; 0: all
	pause  time.Duration
	closes int
	done   chan struct{}
}

var errReqBody = errors.New("the request body's reader broke")

func newReqBody(data []byte, failAt, chunk int, pause time.Duration) *reqBody {
	return &reqBody{data: data, failAt: failAt, chunk: chunk, pause: pause, done: make(chan struct{})}
}

func (b *reqBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	closed, left := b.closes > 0, len(b.data)-b.off
	b.mu.Unlock()
	if closed {
		return 0, errors.New("read on closed request body")
	}
	if left > 0 && b.pause > 0 {
		t := time.NewTimer(b.pause)
		select {
		case <-t.C:
		case <-b.done:
			t.Stop()
			return 0, errors.New("read on closed request body")
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failAt >= 0 && b.off >= b.failAt {
		return 0, errReqBody
	}
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := len(b.data) - b.off
	if b.chunk > 0 {
		n = min(n, b.chunk)
	}
	if b.failAt >= 0 {
		n = min(n, b.failAt-b.off)
	}
	n = copy(p, b.data[b.off:b.off+n])
	b.off += n
	return n, nil
}

func (b *reqBody) Close() error {
	b.mu.Lock()
	b.closes++
	first := b.closes == 1
	b.mu.Unlock()
	if first {
		close(b.done)
	}
	return nil
}

func (b *reqBody) closeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// countBody is a response body that counts its closes, for the responses
// a Func outcome builds (a broken Base's).
type countBody struct {
	io.Reader
	mu     sync.Mutex
	closes int
}

func (b *countBody) Close() error {
	b.mu.Lock()
	b.closes++
	b.mu.Unlock()
	return nil
}

func (b *countBody) Closes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// switchedBody is the body of a 101 Switching Protocols response, which
// net/http makes an io.ReadWriteCloser.
type switchedBody struct{ *attemptBody }

func (switchedBody) Write(p []byte) (int, error) { return len(p), nil }

// closeCounter is what the upstream keeps of each response body it hands
// out.
type closeCounter interface{ Closes() int }

// baseRec is what the upstream saw of one attempt and what it answered.
type baseRec struct {
	call, n    int
	method     string
	header     http.Header
	getBody    bool
	body       []byte // the request body as read
	bodyErr    error  // why reading it failed
	skipped    bool   // not read: past successAfter, the upstream answers at once
	start, end time.Time
	ctxCause   error // the attempt context's cause when the answer was given, nil if alive
	callerDone bool  // the caller's context had ended by then
	resp       *http.Response
	status     int
	respBody   closeCounter // nil without a body
	err        error
	out        *outcome
}

// timedOut reports whether AttemptTimeout had cut the attempt when Base
// answered.
func (b *baseRec) timedOut() bool {
	return b.ctxCause != nil && errors.Is(b.ctxCause, httpretry.ErrAttemptTimeout) && !b.callerDone
}

// lost reports whether the attempt had been cancelled because another
// attempt of its round answered first.
func (b *baseRec) lost() bool {
	return b.ctxCause != nil && !b.callerDone && !errors.Is(b.ctxCause, httpretry.ErrAttemptTimeout)
}

// upstream is the Transport's Base in a scenario: it records each attempt,
// reads the request body as net/http does (giving up, and closing it, when
// the attempt's context ends), and lets a httpretrytest.Script answer.
type upstream struct {
	r      *run
	script *httpretrytest.Script
	sent   atomic.Int64
	mu     sync.Mutex
	recs   []*baseRec
}

// maxUpstreamAttempts bounds the attempts of a scenario: past it, the
// calls are cancelled and the scenario reported.
const maxUpstreamAttempts = 10_000

func (u *upstream) records() []*baseRec {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*baseRec(nil), u.recs...)
}

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rec := &baseRec{call: callOf(req.URL), method: req.Method, header: req.Header.Clone(),
		getBody: req.GetBody != nil, start: time.Now()}
	rec.n, _ = httpretry.AttemptFromContext(ctx)
	if rec.method == "" {
		rec.method = http.MethodGet
	}
	u.mu.Lock()
	u.recs = append(u.recs, rec)
	u.mu.Unlock()
	c := u.r.calls[rec.call]
	rec.out = c.spec.outcomeFor(rec.n)
	if u.r.s.reach {
		httptrace.ContextClientTrace(ctx) // what net/http's client does first
	}
	if c.spec.cancel == cancelAtAttempt && rec.n == c.spec.cancelN {
		c.doCancel()
	}
	finish := func(resp *http.Response, err error) (*http.Response, error) {
		rec.end = time.Now()
		if ctx.Err() != nil {
			rec.ctxCause = context.Cause(ctx)
		}
		rec.callerDone = c.ctx.Err() != nil
		rec.resp, rec.err = resp, err
		if resp != nil {
			rec.status = resp.StatusCode
			if cc, ok := resp.Body.(closeCounter); ok {
				rec.respBody = cc
			}
		}
		return resp, err
	}
	if u.sent.Add(1) == maxUpstreamAttempts {
		u.r.violate("the upstream saw %d attempts: the calls were cancelled", maxUpstreamAttempts)
		for _, c := range u.r.calls {
			c.doCancel()
		}
	}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case rec.n > successAfter:
		// The upstream answers 200 at once, without reading the body.
		req.Body.Close()
		rec.skipped = true
		req = req.WithContext(ctx)
		req.Body = nil
	default:
		data, err := readRequestBody(ctx, req.Body)
		rec.body, rec.bodyErr = data, err
		if err != nil {
			return finish(nil, err)
		}
		req = req.WithContext(ctx)
		req.Body = io.NopCloser(bytes.NewReader(data))
	}
	resp, err := u.script.RoundTrip(req)
	if resp != nil {
		if b, ok := resp.Body.(*httpretrytest.Body); ok {
			cb := &attemptBody{Body: b, ctx: ctx}
			resp.Body = cb
			if resp.StatusCode == http.StatusSwitchingProtocols {
				resp.Body = switchedBody{cb}
			}
		}
	}
	return finish(resp, err)
}

// attemptBody fails every Read once the attempt's context has ended, with its
// cause, as net/http's response bodies do (httpretrytest's Body only
// notices while it pauses): a response returned with a dead context cannot
// be read.
type attemptBody struct {
	*httpretrytest.Body
	ctx context.Context
}

func (b *attemptBody) Read(p []byte) (int, error) {
	if b.ctx.Err() != nil {
		return 0, context.Cause(b.ctx)
	}
	return b.Body.Read(p)
}

// readRequestBody reads rc as net/http's write loop would, closing it;
// when ctx ends first it closes rc, waits for the read to give up and
// returns the context's cause.
func readRequestBody(ctx context.Context, rc io.ReadCloser) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(rc)
		done <- result{data, err}
	}()
	select {
	case res := <-done:
		rc.Close()
		if res.err != nil {
			return res.data, fmt.Errorf("writing the request body: %w", res.err)
		}
		return res.data, nil
	case <-ctx.Done():
		rc.Close()
		res := <-done
		return res.data, context.Cause(ctx)
	}
}

// callOf returns the index of the call a URL belongs to: its path starts
// with /c<index>/.
func callOf(u *url.URL) int {
	var i int
	fmt.Sscanf(u.Path, "/c%d/", &i)
	return i
}

// lockedBuffer collects log output from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ledger is a Budget that wraps a small TokenBucket and checks how the
// Transport uses it: a refund only for a retry it allowed, counts of what
// it was told.
type ledger struct {
	inner *httpretry.TokenBucket
	r     *run

	mu                    sync.Mutex
	begins, allowed, deny int
	refunds               int
	succeeded, succRetry  int
}

func (l *ledger) Begin() {
	l.mu.Lock()
	l.begins++
	l.mu.Unlock()
}

func (l *ledger) AllowRetry(timeout bool) bool {
	ok := l.inner.AllowRetry(timeout)
	l.mu.Lock()
	if ok {
		l.allowed++
	} else {
		l.deny++
	}
	l.mu.Unlock()
	return ok
}

func (l *ledger) Refund(timeout bool) {
	l.mu.Lock()
	l.refunds++
	over := l.refunds > l.allowed
	l.mu.Unlock()
	if over {
		l.r.violate("budget: Refund called %d times for %d retries allowed", l.refunds, l.allowed)
	}
	l.inner.Refund(timeout)
}

func (l *ledger) Succeeded(retried, timeout bool) {
	l.mu.Lock()
	l.succeeded++
	if retried {
		l.succRetry++
	}
	l.mu.Unlock()
	l.inner.Succeeded(retried, timeout)
}

func (l *ledger) Level() (available, capacity float64) { return l.inner.Level() }
