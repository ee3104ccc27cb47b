package invariants

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
	"runtime"
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
	// A signer's permanent error, before the network: the signer layer
	// returns it without passing the request on; without one, Base does.
	{"signer", classUnknown, func(string) error { return errors.New("signer: the credentials expired") }},
	// A server that hangs up (a real Base only; not drawn otherwise).
	{"hangup", classUnknown, func(string) error { return errors.New("the server hung up") }},
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
	call, n  int
	method   string
	header   http.Header
	getBody  bool
	body     []byte // the request body as read
	bodyErr  error  // why reading it failed
	skipped  bool   // not read: past successAfter, the upstream answers at once
	unread   bool   // not read: the attempt failed before it was written
	panicked bool   // Base or Classify panicked on it

	// A real Base's, and Base's layers'.
	receipts     []receipt // the bodies the server received for it
	served       bool      // the server's handler ran for it
	traced       [3]int    // GetConn, WroteHeaders, GotFirstResponseByte, as the tracing layer heard them
	signed       []byte    // what the signer read through GetBody
	signedOK     bool      // ... in full
	signerFailed bool      // the signer failed, and did not pass the request on
	start, end   time.Time
	ctxCause     error // the attempt context's cause when the answer was given, nil if alive
	callerDone   bool  // the caller's context had ended by then
	resp         *http.Response
	status       int
	respBody     closeCounter // nil without a body
	err          error
	out          *outcome
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
	r         *run
	script    *httpretrytest.Script
	sent      atomic.Int64
	probes    atomic.Int64      // attempts of checkHeld's probes
	below     http.RoundTripper // what answers each attempt: Base's layers over the scripted or the real upstream
	probe     http.RoundTripper // what answers a probe
	mu        sync.Mutex
	byAttempt map[[2]int]*baseRec // by call and attempt number
	recs      []*baseRec
}

// maxUpstreamAttempts bounds the attempts of a scenario: past it, the
// calls are cancelled and the scenario reported.
const maxUpstreamAttempts = 10_000

// retriesUnbounded reports whether the policy lets a call retry without
// end: MaxAttempts past maxUpstreamAttempts, and no budget, or no deadline
// (a ratio budget allows a few retries a second whatever fails, and a host
// that went without state for want of room in the table is charged to no
// budget). Its attempts may all fail (an attempt timeout shorter than the
// body takes to send, a server that answers later than that), and then
// only the caller's context ends the call: it is retried for as long as it
// was told to. The harness cancels it at the bound, as its caller would.
func (r *run) retriesUnbounded() bool {
	for _, c := range r.calls {
		if r.effective(c.spec).maxAttempts >= maxUpstreamAttempts && (r.s.pol.budget == budgetNone || c.spec.deadline == 0) {
			return true
		}
	}
	return false
}

func (u *upstream) records() []*baseRec {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*baseRec(nil), u.recs...)
}

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	if isProbe(req) {
		u.probes.Add(1)
		return u.probe.RoundTrip(req)
	}
	ctx := req.Context()
	rec := &baseRec{call: callOf(req.URL), method: req.Method, header: foldHeader(req.Header),
		getBody: req.GetBody != nil, start: time.Now()}
	rec.n, _ = httpretry.AttemptFromContext(ctx)
	if rec.method == "" {
		rec.method = http.MethodGet
	}
	c := u.r.calls[rec.call]
	rec.out = c.spec.outcomeFor(rec.n)
	u.mu.Lock()
	u.recs = append(u.recs, rec)
	if u.byAttempt == nil {
		u.byAttempt = map[[2]int]*baseRec{}
	}
	u.byAttempt[[2]int{rec.call, rec.n}] = rec
	u.mu.Unlock()
	if u.r.panicAt(panicRoundTrip, rec.call, rec.n) {
		rec.panicked = true
		u.r.throwIn(ctx, rec.call, panicRoundTrip, rec.n)
	}
	if c.spec.cancel == cancelAtAttempt && rec.n == c.spec.cancelN {
		c.doCancel()
	}
	if u.sent.Add(1) == maxUpstreamAttempts {
		if !u.r.retriesUnbounded() {
			u.r.violate("the upstream saw %d attempts: the calls were cancelled", maxUpstreamAttempts)
		} else {
			coverage.unbounded.Add(1)
		}
		for _, c := range u.r.calls {
			c.doCancel()
		}
	}
	resp, err := u.below.RoundTrip(req)
	// What the contexts said when Base returned, recorded before a panic
	// after the body, which the checks of that body read too.
	rec.end = time.Now()
	if ctx.Err() != nil {
		rec.ctxCause = context.Cause(ctx)
	}
	rec.callerDone = c.ctx.Err() != nil
	if u.r.panicAt(panicAfterBody, rec.call, rec.n) {
		if resp != nil {
			resp.Body.Close()
		}
		rec.panicked = true
		u.r.throwIn(ctx, rec.call, panicAfterBody, rec.n)
	}
	u.r.panicky(resp, rec.call, rec.n)
	rec.resp, rec.err = resp, err
	if resp != nil {
		rec.status = resp.StatusCode
		if cc, ok := resp.Body.(closeCounter); ok {
			rec.respBody = cc
		} else if resp.Body != nil {
			cb := &countedBody{ReadCloser: resp.Body}
			resp.Body, rec.respBody = cb, cb
		}
	}
	return resp, err
}

// foldHeader returns a copy of h with every name in its canonical form,
// values of names that differ in case alone together: a caller may set
// h["idempotency-key"] directly, and it is that header all the same.
func foldHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		out[ck] = append(out[ck], vs...)
	}
	return out
}

// attempt returns the record of attempt n of call.
func (u *upstream) attempt(call, n int) *baseRec {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byAttempt[[2]int{call, n}]
}

// answer is the scripted upstream: it reads the request body as
// net/http's write loop does (giving up, and closing it, when the
// attempt's context ends), calls the request's httptrace hooks as far as
// the outcome's stage, and lets the Script answer.
func (u *upstream) answer(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	n, _ := httpretry.AttemptFromContext(ctx)
	rec := u.attempt(callOf(req.URL), n)
	c := u.r.calls[rec.call]
	// How far the attempt gets before its outcome: a response is written
	// and answered; an error comes at its drawn stage.
	stage := stageAnswered
	if rec.out.err >= 0 || rec.out.broken != brokenNone {
		stage = rec.out.stage
	}
	var trace *httptrace.ClientTrace
	if u.r.s.reach {
		trace = httptrace.ContextClientTrace(ctx) // what net/http's client does first
		if trace == nil {
			u.r.violate("call%d attempt %d: no httptrace.ClientTrace in the attempt's context", rec.call, rec.n)
			trace = &httptrace.ClientTrace{}
		}
	}
	hook := func(at int, f func()) {
		if trace != nil && stage >= at && f != nil {
			f()
		}
	}
	hook(stageConn, func() {
		if trace.GetConn != nil {
			trace.GetConn(req.URL.Host)
		}
	})
	hook(stageWritten, func() {
		if trace.WroteHeaders != nil {
			trace.WroteHeaders()
		}
	})
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case stage < stageWritten:
		// Nothing was written: the body is closed unread, as RoundTrip must.
		req.Body.Close()
		rec.unread = true
		req = req.WithContext(ctx)
		req.Body = nil
	case rec.n > successAfter:
		// The upstream answers 200 at once, without reading the body.
		req.Body.Close()
		rec.skipped = true
		req = req.WithContext(ctx)
		req.Body = nil
	default:
		data, err := readRequestBody(ctx, req.Body, func(rc io.ReadCloser) { u.closeInterrupting(c, rc) })
		rec.body, rec.bodyErr = data, err
		if err != nil {
			return nil, err
		}
		req = req.WithContext(ctx)
		req.Body = io.NopCloser(bytes.NewReader(data))
	}
	resp, err := u.script.RoundTrip(req)
	hook(stageAnswered, func() {
		if trace.GotFirstResponseByte != nil {
			trace.GotFirstResponseByte()
		}
	})
	if resp != nil {
		if b, ok := resp.Body.(*httpretrytest.Body); ok {
			cb := &attemptBody{Body: b, ctx: ctx}
			resp.Body = cb
			if rec.out.body == rbNopClose {
				resp.Body = &nopCloseBody{attemptBody: cb}
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				resp.Body = switchedBody{cb}
			}
		}
	}
	return resp, err
}

// answerProbe answers a probe of checkHeld's at once.
func answerProbe(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// countedBody counts the closes of a body that does not count its own
// (net/http's).
type countedBody struct {
	io.ReadCloser
	mu     sync.Mutex
	closes int
}

func (b *countedBody) Close() error {
	b.mu.Lock()
	b.closes++
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

func (b *countedBody) Closes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// nopCloseBody is a response body whose Close does not end a Read in
// progress, nor any later one, as an io.NopCloser over a pipe: in-process
// transports, bridges and caches return such bodies. Its Reads end on
// their own (it trickles to its end) or when the attempt's context does.
type nopCloseBody struct {
	*attemptBody
	mu     sync.Mutex
	closes int
}

func (b *nopCloseBody) Close() error {
	b.mu.Lock()
	b.closes++
	b.mu.Unlock()
	return nil
}

func (b *nopCloseBody) Closes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
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
// when ctx ends first it closes rc with interrupt, waits for the read to
// give up and returns the context's cause.
func readRequestBody(ctx context.Context, rc io.ReadCloser, interrupt func(io.ReadCloser)) ([]byte, error) {
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
		interrupt(rc)
		res := <-done
		return res.data, context.Cause(ctx)
	}
}

// closeInterrupting closes rc, an attempt's body that a Read may be inside,
// as net/http does to end that Read. A Close that waits for the Read to
// return cannot end it: inside the bubble the wait (on a mutex) is not
// durable, so the clock would stop with the Read's pause never over. Such
// a Close is reported, and the caller's bodies are let go so that the
// scenario ends.
func (u *upstream) closeInterrupting(c *callRun, rc io.ReadCloser) {
	closed := make(chan struct{})
	go func() {
		rc.Close()
		close(closed)
	}()
	for spins := 0; ; spins++ {
		select {
		case <-closed:
			return
		default:
		}
		if spins >= closeSpins && c.bodyPaused() {
			u.r.violate("%s: Base's Close of an attempt's request body waited for a Read of it in progress, and could not end it", defectCloseWaitsForRead)
			c.unstickBodies()
			<-closed
			return
		}
		runtime.Gosched()
	}
}

// closeSpins is how many times closeInterrupting lets other goroutines
// run before it calls a Close that has not returned, while a Read of the
// caller's body pauses, stuck. A Close that does not wait returns within a
// few; 2,000 was too few on a loaded machine under -race (a Close not yet
// scheduled was reported, seed 18032 at a load average of 10), and the
// spins are spent only while a Close is outstanding.
const closeSpins = 100_000

// defectCloseWaitsForRead names a library defect the harness reports.
const defectCloseWaitsForRead = "library defect (close-waits-for-read)"

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
	inner httpretry.Budget // a token bucket
	r     *run
	host  string

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

func (l *ledger) Level() (available, capacity float64) { return level(l.inner) }
