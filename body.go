package httpretry

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/internal/hoststate"
)

// Draining a discarded response lets its connection be reused. It is
// bounded in bytes and in time: a longer or slower body is closed unread,
// which costs only that connection.
const (
	drainLimit   = 64 << 10
	drainTimeout = 250 * time.Millisecond
)

// drain reads what is left of resp's body, up to drainLimit bytes and for
// at most drainTimeout or until ctx ends, and closes it exactly once. When
// the whole body arrived, it returns a copy of resp holding the body in
// memory, which can still be returned to the caller if the retry that
// called for the drain is not sent; otherwise nil, as for the body of a
// 101 Switching Protocols response, which is a connection.
//
// The read runs on a goroutine of its own, so that its bounds hold
// whatever the body does: a body whose Close does not interrupt a Read (an
// io.NopCloser over a pipe, as in-process transports return) is left to
// that goroutine, which ends when the Read returns. A panic of the body's
// Read there is raised again on the caller's goroutine, as Base's own
// panics are, while the caller waits for the drain; one after it stopped
// waiting has no caller left, and is given to abandoned.
func drain(ctx context.Context, resp *http.Response, abandoned func(any)) *http.Response {
	held := *resp
	rc := resp.Body
	if rc == nil || rc == http.NoBody {
		return &held
	}
	resp.Body = http.NoBody // drained: discard has nothing left to do
	var once sync.Once
	closeRC := func() { once.Do(func() { rc.Close() }) }
	type result struct {
		buf      *bytes.Buffer
		err      error
		panicked bool
		p        any
	}
	done := make(chan result, 1)
	var gone sync.Once // the caller stopped waiting
	stopWaiting := func() bool {
		first := false
		gone.Do(func() { first = true })
		return first
	}
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			p := recover()
			if !stopWaiting() { // the caller left: nobody to raise it for
				if abandoned != nil && p != nil {
					abandoned(p)
				}
				closeRC()
				return
			}
			done <- result{panicked: true, p: p}
		}()
		var buf bytes.Buffer
		_, err := buf.ReadFrom(io.LimitReader(rc, drainLimit))
		returned = true
		done <- result{buf: &buf, err: err}
	}()
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	var r result
	got := false
	select {
	case r = <-done:
		got = true
	case <-timer.C:
	case <-ctx.Done():
	}
	if !got && !stopWaiting() {
		r = <-done // the read panicked as the caller stopped waiting: raise it here
	}
	if r.panicked {
		closeRC()
		if r.p == nil {
			runtime.Goexit()
		}
		panic(r.p)
	}
	closeRC()
	if r.buf == nil {
		return nil // cut short
	}
	complete := r.err == nil && r.buf.Len() < drainLimit // a body of exactly 64 KiB may have more
	if _, ok := rc.(io.Writer); ok {
		complete = false // a switched protocol's connection (101): no copy stands for it
	}
	if !complete {
		return nil
	}
	held.Body = io.NopCloser(bytes.NewReader(r.buf.Bytes()))
	return &held
}

// discard drains and closes resp's body when nobody will read it.
func discard(ctx context.Context, resp *http.Response, abandoned func(any)) {
	if resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		drain(ctx, resp, abandoned)
	}
}

// Reading a response body ahead (Policy.ReadBodyBytes): a body of at most
// the limit is read before RoundTrip returns, as part of its attempt, so
// that its failure is the attempt's, its time counts toward the attempt's
// timeout and a hedged round's race, and Classify can look at it.

// readAheadWindow bounds the read ahead of a body of unknown length: what
// has not arrived by then streams, as the rest of a larger body does, so
// that a stream's header reaches the caller within it whatever the stream
// sends.
const readAheadWindow = 250 * time.Millisecond

// readAheadOf reads ahead the body of resp, Base's answer to req with
// err, up to limit bytes, a body of unknown length for at most window,
// and returns what the attempt got.
func readAheadOf(req *http.Request, resp *http.Response, err error, limit int64, window time.Duration) (*http.Response, error) {
	if err != nil || resp == nil || req.Method == http.MethodHead {
		return resp, err // a response to HEAD has no content
	}
	if err := readAhead(req.Context(), resp, limit, window); err != nil {
		return nil, err
	}
	return resp, nil
}

// readAhead reads resp's body when it is at most limit bytes, and replaces
// it with an aheadBody: the bytes in memory, or, for a larger body, those
// read and then the rest of the stream. A body that is a stream (isStream)
// is not read at all, and one of unknown length only for at most window
// (readWindow). The end of ctx, the attempt's context, closes the body, so
// that a body whose Read does not watch the context still ends with the
// attempt. A Read that fails or panics closes the body; the failure is
// returned as a *responseBodyError.
func readAhead(ctx context.Context, resp *http.Response, limit int64, window time.Duration) error {
	rc := resp.Body
	if rc == nil || rc == http.NoBody {
		return nil
	}
	if _, ok := rc.(io.Writer); ok || resp.StatusCode == http.StatusSwitchingProtocols {
		return nil // a switched protocol's connection, not a body
	}
	b := &aheadBody{orig: rc, bounded: true}
	if resp.ContentLength > limit || isStream(resp.Header) {
		resp.Body = b
		return nil
	}
	if resp.ContentLength < 0 {
		if err := b.readWindow(ctx, limit, window); err != nil {
			return err
		}
		resp.Body = b
		return nil
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { b.closeOrig() })
		defer stop()
	}
	read := false
	defer func() {
		if !read {
			b.closeOrig() // a Read that panicked
		}
	}()
	buf, over, whole, err := readUpTo(rc, resp.ContentLength, limit, &b.peek)
	read = true
	if err != nil {
		b.closeOrig()
		return &responseBodyError{err}
	}
	b.buf, b.shown, b.peeked, b.whole = buf, len(buf), over, whole
	if whole {
		b.closeOrig() // read to its end: its connection is free; an error closing it changes nothing
	}
	resp.Body = b
	return nil
}

// isStream reports whether a response with header h is a stream of events
// or messages, by its media type: server-sent events, newline-delimited or
// sequenced JSON, a multipart stream, gRPC, or a type with a stream
// parameter (Kubernetes' watch, application/json;stream=watch). A stream
// may pause for as long as it likes between two messages: it is handed to
// the caller with its header, as net/http hands every body.
func isStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	if _, ok := params["stream"]; ok {
		return true
	}
	switch mt {
	case "text/event-stream", "application/x-ndjson", "application/ndjson", "application/jsonl",
		"application/x-jsonlines", "application/json-seq", "application/stream+json", "multipart/x-mixed-replace":
		return true
	}
	return strings.HasPrefix(mt, "application/grpc")
}

// readUpTo reads r, whose length is cl (-1: unknown), until its end or
// until more than limit bytes arrived, in a buffer that never grows past
// limit bytes. whole reports that the end was reached; over, that a byte
// past the limit came, into peek (see readPeek).
func readUpTo(r io.Reader, cl, limit int64, peek *[1]byte) (buf []byte, over, whole bool, err error) {
	lim := min(limit, math.MaxInt)
	n := int64(512)
	if cl >= 0 {
		n = cl + 1
	}
	buf = make([]byte, 0, min(n, lim))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= lim {
				over, whole, err := readPeek(r, peek)
				return buf, over, whole, err
			}
			next := min(2*int64(cap(buf)), lim)
			if lim-next < 512 {
				next = lim // no copy of almost all of it for the last few bytes
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		switch {
		case err == io.EOF:
			return buf, false, true, nil
		case err != nil:
			return buf, false, false, err
		}
	}
}

// readPeek reads one byte of r, which has given the read ahead its limit
// of bytes, into p: a byte there tells a body of exactly the limit from a
// longer one. It is a byte of its own, not one more in the buffer, so
// that the buffer of a 64 KiB limit is 64 KiB, not 64 KiB and a byte,
// which the allocator rounds up to 72 KiB. over reports that the byte
// came (its body is served after the buffer, before the rest of r, and an
// io.EOF with it is left for r to report again); whole, that r ended
// there.
func readPeek(r io.Reader, p *[1]byte) (over, whole bool, err error) {
	for {
		m, err := r.Read(p[:])
		switch {
		case err != nil && err != io.EOF:
			return false, false, err
		case m > 0:
			return true, false, nil
		case err == io.EOF:
			return false, true, nil
		}
	}
}

// aheadBody is a response body read ahead: the bytes read, then, for a
// body larger than the limit or not whole within the read ahead's window,
// the rest of the original. While Classify runs it is bounded: it reads
// only the bytes read ahead, up to the limit.
type aheadBody struct {
	buf     []byte
	shown   int     // how many bytes of buf Classify may read
	peek    [1]byte // the byte past the limit (readPeek), if peeked
	peeked  bool    // the body is longer than the limit: peek comes after buf
	off     int
	orig    io.ReadCloser // the original body, read on after buf unless whole
	whole   bool          // buf holds all of orig, which is closed
	bounded bool          // Classify is reading: stop at shown
	once    sync.Once     // orig is closed once, by the caller or by the attempt's end
	err     error         // what closing orig returned

	// tail is the read ahead of a body of unknown length, on a goroutine
	// of its own (readWindow), that the window ended: its bytes stand in
	// for buf, and grow until it stops; then orig is read here.
	tail *window
}

// window is a body of unknown length read ahead on a goroutine of its own
// (aheadBody.readOn), shared with the aheadBody that reads it. The
// goroutine alone writes buf: its bytes past len, then, under mu, its
// length, or a larger copy of it that replaces it, so that a body holds
// one buffer, never it and the one it grew from.
type window struct {
	mu   sync.Mutex
	s    windowState   // under mu
	wake chan struct{} // a Read returned or the goroutine stopped; one wake-up at most waits
	stop atomic.Bool   // read no more once the Read under way returns
}

// windowState is what a window holds at one moment.
type windowState struct {
	buf      []byte // the bytes read so far
	err      error  // how the last Read ended (io.EOF included); nil while reading on
	over     bool   // a byte past the limit came, in peek: the goroutine stopped
	peek     byte
	done     bool // the goroutine stopped reading: a byte past the limit, a failed Read, or stopped
	panicked bool // a Read panicked (p) or called runtime.Goexit (p nil)
	p        any
}

func (w *window) state() windowState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s
}

func (w *window) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// rethrow ends the caller's goroutine as the Read of s ended the read
// ahead's: with its panic, or runtime.Goexit.
func (s windowState) rethrow() {
	if s.p == nil {
		runtime.Goexit()
	}
	panic(s.p)
}

// readWindow reads b.orig, a body of unknown length, ahead for at most
// window, on a goroutine of its own, so that a body that pauses (a stream
// without a stream's media type, a long poll) is handed over when the
// window ends, with what came, rather than hold its header. It stops at
// the body's end, or once limit+1 bytes came, or when ctx ends.
func (b *aheadBody) readWindow(ctx context.Context, limit int64, window time.Duration) error {
	size := int(min(limit, math.MaxInt))
	w := newWindow(size)
	go b.readOn(w, size)
	timer := time.NewTimer(window)
	defer timer.Stop()
	// settled hands over what w holds once its goroutine stopped.
	settled := func(s windowState) (bool, error) {
		switch {
		case !s.done:
			return false, nil
		case s.panicked:
			b.closeOrig()
			s.rethrow()
		case s.err == io.EOF:
			b.buf, b.shown, b.whole = s.buf, len(s.buf), true
			b.closeOrig() // read to its end: its connection is free
		case s.err != nil:
			b.closeOrig()
			return true, &responseBodyError{s.err}
		case s.over: // more than limit bytes
			b.buf, b.shown, b.peek[0], b.peeked = s.buf, len(s.buf), s.peek, true
		default: // stopped by the window's end before either: handed over as it is
			return false, nil
		}
		return true, nil
	}
	for {
		select {
		case <-w.wake:
			if ok, err := settled(w.state()); ok {
				return err
			}
		case <-timer.C:
			w.stop.Store(true)
			s := w.state()
			if ok, err := settled(s); ok {
				return err
			}
			b.shown, b.tail = len(s.buf), w
			return nil
		case <-ctx.Done():
			w.stop.Store(true)
			b.closeOrig()
			return &responseBodyError{context.Cause(ctx)}
		}
	}
}

func newWindow(size int) *window {
	return &window{s: windowState{buf: make([]byte, 0, min(512, size))}, wake: make(chan struct{}, 1)}
}

// readOn reads b.orig into w, as readUpTo does, until it has read size
// bytes and one past them (the peek, as readPeek), a Read fails, w is
// stopped or b is closed (which ends the Read under way); then it marks w
// done.
func (b *aheadBody) readOn(w *window, size int) {
	returned := false
	defer func() {
		var p any
		if !returned {
			p = recover()
		}
		w.mu.Lock()
		w.s.done, w.s.panicked, w.s.p = true, !returned, p
		w.mu.Unlock()
		w.signal()
	}()
	buf := w.s.buf // only this goroutine changes w.s.buf
	for !w.stop.Load() {
		if len(buf) >= size {
			var p [1]byte
			over, whole, err := readPeek(b.orig, &p)
			w.mu.Lock()
			switch {
			case over:
				w.s.over, w.s.peek = true, p[0]
			case whole:
				w.s.err = io.EOF
			default:
				w.s.err = err
			}
			w.mu.Unlock()
			break
		}
		if len(buf) == cap(buf) {
			next := min(2*cap(buf), size)
			if size-next < 512 {
				next = size
			}
			buf = append(make([]byte, 0, next), buf...)
			w.mu.Lock()
			w.s.buf = buf // the buffer it grew from is no longer held
			w.mu.Unlock()
		}
		m, err := b.orig.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		w.mu.Lock()
		w.s.buf, w.s.err = buf, err
		w.mu.Unlock()
		w.signal()
		if err != nil {
			break
		}
	}
	returned = true
}

// errNotReadAhead ends a classifier's read of a body larger than
// Policy.ReadBodyBytes, at the end of the bytes read ahead.
var errNotReadAhead = errors.New("httpretry: the rest of the response body is not read before classification: it is larger than Policy.ReadBodyBytes, a stream, or did not arrive within the read ahead's window")

func (b *aheadBody) Read(p []byte) (int, error) {
	for {
		buf := b.buf
		var s windowState
		if b.tail != nil {
			s = b.tail.state()
			buf = s.buf
		}
		end := len(buf)
		if b.bounded {
			end = b.shown
		}
		if b.off < end {
			n := copy(p, buf[b.off:end])
			b.off += n
			return n, nil
		}
		switch {
		case b.whole:
			return 0, io.EOF
		case b.bounded:
			return 0, errNotReadAhead
		case b.peeked:
			if len(p) == 0 {
				return 0, nil
			}
			p[0], b.peeked = b.peek[0], false
			b.buf, b.off = nil, 0 // the prefix is read: hold it no longer
			return 1, nil
		case b.tail != nil:
			switch {
			case s.panicked:
				b.tail = nil
				s.rethrow()
			case s.over:
				b.tail = nil
				b.peek[0], b.peeked = s.peek, true
			case s.err != nil:
				return 0, s.err // io.EOF included: it stays the body's end
			case s.done:
				b.tail = nil // the goroutine stopped: orig is read here from now on
			default:
				<-b.tail.wake
			}
			continue
		}
		b.buf, b.off = nil, 0 // the prefix is read: hold it no longer
		return b.orig.Read(p)
	}
}

// Close closes the original body, if it was not read to its end.
func (b *aheadBody) Close() error {
	if b.whole {
		return nil
	}
	return b.closeOrig()
}

func (b *aheadBody) closeOrig() error {
	b.once.Do(func() {
		b.err = b.orig.Close()
	})
	return b.err
}

// unbound ends Classify's view of the body of resp, if it was read ahead:
// whatever Classify read, the body reads again from its start, and on
// past the bytes read ahead.
func unbound(resp *http.Response) {
	if resp == nil {
		return
	}
	if b, ok := resp.Body.(*aheadBody); ok {
		b.off, b.bounded = 0, false
	}
}

// responseBodyError is the error of an attempt whose response body failed
// while it was read ahead. The server had answered, so the request was
// processed: it is never ClassNotProcessed (see classifyError).
type responseBodyError struct{ err error }

func (e *responseBodyError) Error() string {
	return "httpretry: reading the response body: " + e.err.Error()
}

func (e *responseBodyError) Unwrap() error { return e.err }

// Resuming a response body (Policy.MaxResumes): when reading the body of
// a GET's response fails with a transient error after the header was
// handed to the caller, the Transport asks for the rest of the same
// representation, and the caller's Read goes on where it stopped. A
// resume is an attempt of the call, through the same pipeline as a retry.

// resumable wraps the body of resp, the response to the call's last
// attempt about to be returned, in a resumeBody, when it is safe to
// resume: a 200 to a GET without a body, a Range of the caller's or
// hedging, with a strong validator, without a content coding, whose
// server does not say it refuses ranges.
func (c *callState) resumable(resp *http.Response) {
	req := c.req
	if (req.Method != "" && req.Method != http.MethodGet) || c.body != nil || c.p.hedge ||
		resp.StatusCode != http.StatusOK || resp.Uncompressed || resp.Body == nil || resp.Body == http.NoBody ||
		req.Header.Get("Range") != "" || req.Header.Get("If-Range") != "" {
		return
	}
	if _, ok := resp.Body.(io.Writer); ok {
		return
	}
	if !identityCoded(resp.Header) || signedOverRange(req.Header) || (c.edited != nil && signedOverRange(c.edited.Header)) {
		return
	}
	if strings.EqualFold(strings.TrimSpace(resp.Header.Get("Accept-Ranges")), "none") {
		return
	}
	etag, lastModified := strongValidator(resp.Header)
	if etag == "" && lastModified == "" {
		return
	}
	s := c.state
	if s == nil {
		s = c.t.states.Load(c.h)
	}
	if s != nil {
		if until := s.ResumesRefusedUntil.Load(); until != 0 && time.Now().UnixNano() < until {
			return // it refused a resume lately: the cut reaches the caller as such
		}
	}
	// The body keeps a copy of the call for the resumes, which come after
	// RoundTrip returned: a call whose body is not resumable stays off the
	// heap.
	resp.Body = &resumeBody{c: *c, cur: resp.Body, etag: etag, lastModified: lastModified,
		total: resp.ContentLength, left: c.p.maxResumes, max: c.p.maxResumes}
}

// signedOverRange reports whether h, a request's header, carries a
// signature made above the Transport that covers the Range header a
// resume adds, so that the server would refuse the resume: Azure
// Storage's Shared Key schemes ("SharedKey account:signature",
// "SharedKeyLite …"), whose string to sign has a place for Range whether
// the request sends one or not. Schemes that sign only the headers they
// list (AWS Signature Version 4, Google's HMAC) cover no Range on a
// request without one, which is the only kind resumed; a bearer token, a
// SAS or presigned URL signs no header.
func signedOverRange(h http.Header) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	return strings.EqualFold(scheme, "SharedKey") || strings.EqualFold(scheme, "SharedKeyLite")
}

// strongValidator returns the strong validator of a response with header
// h: its ETag, if strong, else its Last-Modified when that is strong by
// RFC 9110 § 8.8.2.2, at least one second before its Date.
func strongValidator(h http.Header) (etag, lastModified string) {
	if vs := h.Values("Etag"); len(vs) == 1 {
		if v := vs[0]; len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && !strings.ContainsAny(v[1:len(v)-1], "\" \t") {
			return v, ""
		}
		return "", "" // weak or malformed: a Last-Modified cannot stand in for it
	}
	lm, date := h.Values("Last-Modified"), h.Values("Date")
	if len(lm) != 1 || len(date) != 1 {
		return "", ""
	}
	m, err1 := http.ParseTime(lm[0])
	d, err2 := http.ParseTime(date[0])
	if err1 != nil || err2 != nil || d.Sub(m) < time.Second {
		return "", ""
	}
	return "", lm[0]
}

// ResumeError ends the read of a response body that broke after some
// bytes and whose rest could not be had from the same representation (see
// Policy.MaxResumes): the server sent another one, or the whole again, or
// a range that does not start where the read stopped, or the resumes ran
// out. No byte of the answer it refused reaches the caller. Unwrap returns
// Err, the read error that broke the body, so that errors.Is(err,
// io.ErrUnexpectedEOF) holds as without a resume, and Cause, when set.
type ResumeError struct {
	Offset int64  // bytes of the body the caller had read when it broke
	Status int    // the status of the resume's answer that was refused; 0 when none was (the resumes ran out, were refused or failed)
	Reason string // why the rest was not accepted, in words
	Err    error  // the read error that broke the body
	Cause  error  // what ended the last resume, if not its answer: its own error, a refusal (ErrBudgetExhausted, ErrCircuitOpen), the caller's context; or nil
}

func (e *ResumeError) Error() string {
	s := "httpretry: response body broken after " + strconv.FormatInt(e.Offset, 10) + " bytes and not resumed: " + e.Reason
	if e.Cause != nil {
		s += " (" + e.Cause.Error() + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ResumeError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// resumeBody is the body of a response that may be resumed. It reads the
// current response's body, the original's or a resume's, and holds no
// copy of any. Close may come from another goroutine during a Read or a
// resume: it closes the current body and ends the resume's context.
type resumeBody struct {
	c            callState // the call, used again by a resume after RoundTrip returned
	etag         string    // the strong validator: an ETag, or
	lastModified string    // a Last-Modified
	total        int64     // the representation's length; -1: not known yet
	off          int64     // bytes read so far
	left         int       // resumes left before the read makes progress again
	max          int       // Policy.MaxResumes: what left starts from, again after progress
	tries        int       // resumes since the read last made progress: the backoff's retry number
	acceptedAt   int64     // off when the current body began: a read past it made progress
	prevDelay    time.Duration
	asked        time.Duration // the wait the last resume's answer asked for (Retry-After, a hint); 0 if none

	mu     sync.Mutex
	cur    io.ReadCloser           // the current response's body; its Close ends its attempt's context
	closed bool                    // Close was called
	ctx    context.Context         // bounds the resumes, under the caller's context; nil until the first
	cancel context.CancelCauseFunc // ends ctx, at Close
	err    error                   // the read ended for good: what every Read returns
}

// resumeRefusalHold is how long a host that refused a resume 401 or 403
// is not sent another: its cut bodies reach the caller as cut meanwhile.
const resumeRefusalHold = time.Minute

// resumeAtOnce is how much of a body must have arrived since it was
// accepted for its cut to be resumed at once: a body that flowed, cut
// once. A server that cuts sooner every time is resumed after a first
// retry's backoff each time, bounded by the retry budget: what goes at
// once is at most one resume per 64 KiB delivered.
const resumeAtOnce = 64 << 10

// errBodyClosed is what a Read returns after the body was closed during
// a resume.
var errBodyClosed = errors.New("httpretry: read on closed response body")

func (b *resumeBody) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		cur, err := b.cur, b.err
		b.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if b.total >= 0 {
			// Never past the representation's end: a partial content
			// without a Content-Length that sends more is cut at it.
			if b.off >= b.total {
				return 0, io.EOF
			}
			p = p[:min(int64(len(p)), b.total-b.off)]
		}
		n, err := cur.Read(p)
		b.off += int64(n)
		switch {
		case err == io.EOF && b.total >= 0 && b.off < b.total:
			err = io.ErrUnexpectedEOF // a body that ended short of its length was cut
		case err != nil && b.total >= 0 && b.off == b.total:
			err = io.EOF // every byte arrived: a connection that broke after the last one cut nothing
		}
		if err == nil || err == io.EOF || !b.resumes(err) {
			return n, err
		}
		if rerr := b.resume(err); rerr != nil {
			return n, rerr
		}
		if n > 0 {
			return n, nil
		}
	}
}

// resumes reports whether the read error err calls for a resume: a
// transient failure, not a Close, nor the end of the caller's context.
func (b *resumeBody) resumes(err error) bool {
	c := &b.c
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed || c.req.Context().Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	class := ClassDefault
	if c.p.classify != nil {
		class = c.p.classify(c.req, nil, err)
	}
	if class == ClassDefault {
		class = classify(c.req, nil, err, c.p)
	}
	return class.retryable()
}

// resume asks for the rest of the body after the read error cause, until
// a resume is accepted or the resumes run out. On success the next Read
// reads the accepted response's body; otherwise it returns the
// *ResumeError that every Read returns from then on.
func (b *resumeBody) resume(cause error) (err error) {
	c := &b.c
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return cause
	}
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithCancelCause(c.req.Context())
	}
	ctx, old := b.ctx, b.cur
	b.cur = http.NoBody
	b.mu.Unlock()
	closeBody(old) // its connection is broken: free it, and end its attempt's context

	accepted := false
	defer func() {
		if !accepted { // a refusal, a rejection, or a panic on its way to the caller
			if err == nil {
				err = &ResumeError{Offset: b.off, Reason: "a resume panicked", Err: cause}
			}
			b.mu.Lock()
			b.err = err
			b.mu.Unlock()
		}
	}()
	// The resume goes to the endpoint the response came from (c.h and
	// c.fo.addr), never to another: the call's use of its endpoints' state
	// has ended.
	c.state = nil
	if c.fo != nil {
		c.fo.eps = nil
	}
	if c.keepsState() {
		c.useState()
		defer c.detach()
	}
	defer c.unreserve() // a resume whose cost was taken is not sent, whatever ends it, a panic included
	var last error      // the last resume's own failure
	if b.off > b.acceptedAt {
		// The body that broke delivered bytes: the read made progress, so
		// the resumes and their backoff start afresh, as a retry reader
		// that counts its retries per Read does (azblob's RetryReader).
		// Every resume is still charged to the budget.
		b.left, b.tries, b.prevDelay = b.max, 0, 0
	}
	// A body that was flowing (resumeAtOnce bytes or more since it was
	// accepted) and broke is an isolated cut: its first resume goes at
	// once. The backoff is for the cuts in a row, which bring nothing.
	atOnce := b.off-b.acceptedAt >= resumeAtOnce
	for {
		if b.left <= 0 {
			return &ResumeError{Offset: b.off, Reason: "no resumes left", Err: cause, Cause: last}
		}
		b.left--
		if !c.reserve(false) {
			return &ResumeError{Offset: b.off, Reason: "the retry budget is empty", Err: cause, Cause: ErrBudgetExhausted}
		}
		var d time.Duration
		if !atOnce {
			b.tries++
			d = c.p.backoff.Delay(b.tries, b.prevDelay, nil)
			b.prevDelay = d
		}
		atOnce = false
		if b.asked > 0 {
			d = max(d, addJitter(b.asked)) // never earlier than asked, as a retry
			b.asked = 0
		}
		if werr := backoff.Wait(ctx, d); werr != nil {
			c.unreserve()
			return b.ended(ctx, cause, werr)
		}
		var a attempt
		body, rerr, retry := b.send(ctx, &a)
		switch {
		case body != nil:
			b.mu.Lock()
			if b.closed {
				b.mu.Unlock()
				closeBody(body)
				return errBodyClosed
			}
			b.cur = body
			b.acceptedAt = b.off
			b.mu.Unlock()
			accepted = true
			return nil
		case !retry:
			if re, ok := rerr.(*ResumeError); ok {
				re.Err = cause
			}
			return rerr
		}
		last = rerr
	}
}

// ended is the error of a resume that the end of ctx, or of its deadline,
// stopped before an answer.
func (b *resumeBody) ended(ctx context.Context, cause, err error) error {
	reason := "the context ended"
	if errors.Is(err, backoff.ErrDeadline) {
		reason = "the wait would pass the context's deadline"
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
		if b.c.req.Context().Err() == nil {
			return errBodyClosed // Close ended it
		}
	}
	return &ResumeError{Offset: b.off, Reason: reason, Err: cause, Cause: err}
}

// send sends one resume, a, under ctx, through the attempt pipeline. It
// returns the accepted response's body; or the resume's failure and retry
// set when it is transient and calls for another resume; or the error
// that ends the read.
func (b *resumeBody) send(ctx context.Context, a *attempt) (body io.ReadCloser, err error, retry bool) {
	c := &b.c
	defer a.release()
	observed := false
	defer func() {
		if !observed {
			a.abort() // OnAttempt or the Logger panicked: the answer is given up
		}
	}()
	berr := c.begin(ctx, a, c.planAttempt(resumeAttempt, false), nil, nil)
	if berr != nil {
		c.unreserve()
		r := berr.(*refusal)
		if ctx.Err() != nil {
			return nil, b.ended(ctx, nil, r.err), false
		}
		return nil, &ResumeError{Offset: b.off, Reason: "the resume was refused", Cause: r.err}, false
	}
	h := a.Request.Header
	h.Set("Range", "bytes="+strconv.FormatInt(b.off, 10)+"-")
	h.Set("If-Range", cmp.Or(b.etag, b.lastModified))
	if h.Get("Accept-Encoding") == "" {
		h.Set("Accept-Encoding", "identity") // net/http would ask for gzip and decode it
	}
	resp, rterr, fired := a.send(c.t)
	c.settle(ctx, a, resp, rterr, fired)
	reason := ""
	if a.Response != nil {
		reason = b.check(a.Response)
	}
	switch {
	case a.Response != nil && reason == "":
		a.Stop = StopSuccess
	case a.Class.retryable() && ctx.Err() == nil && (a.Response == nil || a.Response.StatusCode != http.StatusOK):
		// A failure of the resume's own, a 503: worth another resume,
		// after the wait its answer asks for, as a retry would be.
		a.Stop, retry = StopNone, true
		if sd, _, ok := c.p.hints.serverDelay(a.Response, time.Now()); ok {
			if sd > c.p.maxRetryAfter {
				a.Stop, retry = StopRetryAfter, false
				reason = "the server asked to wait longer than MaxRetryAfter"
			}
			b.asked = sd
		}
	default:
		a.Stop = StopFatal
	}
	if c.t.OnAttempt != nil || c.t.Logger != nil {
		c.observe(ctx, &a.Attempt)
	}
	observed = true
	switch {
	case a.Stop == StopSuccess:
		a.handOver()
		return a.Response.Body, nil, false
	case a.Response != nil:
		discard(ctx, a.Response, c.abandoned())
		a.end()
		if retry {
			return nil, errors.New("httpretry: the resume got " + a.Response.Status), true
		}
		if st := a.Response.StatusCode; (st == http.StatusUnauthorized || st == http.StatusForbidden) && c.state != nil {
			// A signature, token or policy that does not allow the Range:
			// the next cuts at the host would be refused the same way.
			c.state.ResumesRefusedUntil.Store(time.Now().Add(resumeRefusalHold).UnixNano())
		}
		return nil, &ResumeError{Offset: b.off, Status: a.Response.StatusCode, Reason: reason}, false
	}
	a.end()
	if retry {
		return nil, a.Err, true
	}
	if ctx.Err() != nil {
		return nil, b.ended(ctx, nil, a.Err), false
	}
	return nil, &ResumeError{Offset: b.off, Reason: "the resume failed", Cause: a.Err}, false
}

// check returns why resp, the answer to a resume, cannot continue the
// body, or "" when it does: a 206 of the same representation, without a
// content coding, whose Content-Range starts where the read stopped and
// runs to the end of a representation of the original's length (or, when
// the original's was not known, of a length it states).
func (b *resumeBody) check(resp *http.Response) string {
	h := resp.Header
	switch {
	case resp.StatusCode == http.StatusOK:
		return "the server sent the whole representation again (200): it changed, or the server ignores ranges"
	case resp.StatusCode == http.StatusPreconditionFailed:
		return "the representation changed (412)"
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return "the server refused the range (416)"
	case resp.StatusCode != http.StatusPartialContent:
		return "the server answered " + strconv.Itoa(resp.StatusCode) + ", not 206"
	case resp.Uncompressed:
		return "the partial content was decompressed"
	}
	if !identityCoded(h) {
		return "the partial content has a content coding (" + strings.Join(h.Values("Content-Encoding"), ", ") + ")"
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && strings.EqualFold(mt, "multipart/byteranges") {
		return "the partial content is multipart/byteranges, not the one range asked for"
	}
	switch {
	case b.etag != "" && (len(h.Values("Etag")) != 1 || h.Get("Etag") != b.etag):
		return "the partial content is of another representation (ETag)"
	case b.lastModified != "" && len(h.Values("Last-Modified")) > 0 && h.Get("Last-Modified") != b.lastModified:
		return "the partial content is of another representation (Last-Modified)"
	}
	vs := h.Values("Content-Range")
	if len(vs) != 1 {
		return "the partial content has no single Content-Range"
	}
	start, end, total, ok := parseContentRange(vs[0])
	switch {
	case !ok:
		return "the partial content's Content-Range does not parse"
	case start != b.off:
		return "the partial content does not start where the read stopped"
	case total < 0:
		return "the partial content's complete length is not known"
	case b.total >= 0 && total != b.total:
		return "the partial content is of a representation of another length"
	}
	switch {
	case end != total-1:
		return "the partial content does not run to the end of the representation"
	case resp.ContentLength >= 0 && resp.ContentLength != end-start+1:
		return "the partial content's Content-Length does not match its Content-Range"
	}
	b.total = total
	return ""
}

// identityCoded reports whether h names no content coding but identity,
// in any of its Content-Encoding fields and list members.
func identityCoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// parseContentRange parses a Content-Range of a single byte range, "bytes
// first-last/complete" (RFC 9110 § 14.4), complete being "*" (-1) or a
// length greater than last.
func parseContentRange(v string) (first, last, complete int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, length, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	f, l, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	first, err1 := parseDigits(f)
	last, err2 := parseDigits(l)
	complete = -1
	var err3 error
	if length != "*" {
		complete, err3 = parseDigits(length)
	}
	if err1 != nil || err2 != nil || err3 != nil || last < first || (complete >= 0 && last >= complete) {
		return 0, 0, 0, false
	}
	return first, last, complete, true
}

// parseDigits parses a non-empty string of decimal digits.
func parseDigits(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not digits")
	}
	return strconv.ParseInt(s, 10, 64)
}

// Close closes the current response's body, ends its attempt's context,
// and stops a resume in progress.
func (b *resumeBody) Close() error {
	b.mu.Lock()
	b.closed = true
	cur, cancel := b.cur, b.cancel
	b.cur = http.NoBody
	if b.err == nil {
		b.err = errBodyClosed
	}
	b.mu.Unlock()
	if cancel != nil {
		cancel(errBodyClosed)
	}
	return cur.Close()
}

// useState gives a resume, after RoundTrip returned, its host's state
// again, creating it if the host has none: a cut body is a failure, whose
// resume the budget pays for.
func (c *callState) useState() {
	c.state = c.t.states.Use(c.h)
	if c.state == nil {
		p := c.statePolicy()
		c.state = c.t.states.Create(c.h, time.Now(), func() *hoststate.State { return p.newState(c.t, c.h.String()) })
	}
}
