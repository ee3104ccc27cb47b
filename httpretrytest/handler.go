package httpretrytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// ErrHandlerAborted is the error of a request whose handler panicked with
// http.ErrAbortHandler (or called runtime.Goexit, as t.FailNow does) before
// it sent a response: the in-memory counterpart of a server that closed the
// connection without answering. If the handler had begun its response,
// reading the body fails with io.ErrUnexpectedEOF instead.
var ErrHandlerAborted = errors.New("httpretrytest: handler aborted the request")

// HandlerTransport is an http.RoundTripper that serves each request with
// Handler in memory: no listener, no socket, no goroutine that outlives the
// exchange. Inside a testing/synctest bubble, the handler's waits and the
// client's run on the same fake clock, so a test of retries with
// Retry-After: 30 takes no real time. It records every request it serves,
// like a [Script].
//
// The exchange is streamed both ways. The handler runs in its own goroutine
// and reads the caller's request body as it is sent. The response arrives
// when the handler first writes, flushes or returns; each Write then reaches
// the caller as it happens, as if the handler flushed after every write, so
// a handler that writes slowly is seen as a slow body, and a handler that
// writes while nobody reads blocks (inside a bubble, an unclosed response
// body therefore shows up as a blocked goroutine). The handler's request
// context is derived from the caller's: cancelling the request cancels the
// handler's context, and so do closing the response body and the handler
// returning, as with net/http's server.
//
// The handler sees a server-side request: URL with only path and query,
// RequestURI, Host, RemoteAddr "192.0.2.1:1234", HTTP/1.1, ContentLength -1
// for a body of unknown length. Content-Type is sniffed from the first
// write when the handler sets none; HEAD responses and 1xx, 204 and 304
// statuses carry no body. Not supported: trailers, 1xx informational
// responses (they are dropped), Hijack, 101 Switching Protocols, the Date
// header, Content-Length enforcement, and http.ResponseController's
// deadlines. A handler that panics with anything but http.ErrAbortHandler
// crashes the test binary, loudly.
//
// The zero HandlerTransport serves http.DefaultServeMux, as http.Server
// does. It is safe for concurrent use.
type HandlerTransport struct {
	// Handler serves every request. Nil means http.DefaultServeMux.
	Handler http.Handler

	// KeyHeader names the header recorded as [Request].Key. Empty means
	// [DefaultKeyHeader], "Idempotency-Key".
	KeyHeader string

	rec recorder
}

// Requests returns a copy of every request served so far, in arrival order.
// The copies are its own: editing their URL, Header or Body changes
// nothing that a later Requests call or a Check function sees. Their
// ResponseBody is shared, its counts live.
func (t *HandlerTransport) Requests() []Request { return t.rec.snapshot() }

// RoundTrip serves req with Handler and returns its response as soon as
// the handler has begun it.
func (t *HandlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return nil, errNilURL(req)
	}
	e := t.rec.begin(req, t.KeyHeader)
	ctx := req.Context()
	if ctx.Err() != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		err := context.Cause(ctx)
		t.rec.answered(req.Context(), e, 0, nil, err)
		return nil, err
	}
	h := t.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	sctx, cancel := context.WithCancelCause(ctx)
	sreq := serverRequest(sctx, req, t.rec.body(e, req.Body))
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, pw: pw, ready: make(chan struct{}), head: req.Method == http.MethodHead}
	go serve(h, w, sreq, cancel)

	select {
	case <-w.ready:
	case <-ctx.Done():
		err := context.Cause(ctx)
		pr.CloseWithError(err) // a handler still writing fails at once
		t.rec.answered(req.Context(), e, 0, nil, err)
		return nil, err
	}
	if w.abortErr != nil {
		t.rec.answered(req.Context(), e, 0, nil, w.abortErr)
		return nil, w.abortErr
	}

	b := newBody(pr, w.contentLength)
	b.ctx = ctx
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	b.closer = func() error {
		stop()
		pr.Close()
		cancel(nil) // as a server does when its client hangs up
		return nil
	}
	resp := &http.Response{
		Status:        statusLine(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sentHeader,
		Body:          b,
		ContentLength: w.contentLength,
		Request:       req,
	}
	t.rec.answered(req.Context(), e, w.status, b, nil)
	return resp, nil
}

// serve runs the handler and ends the exchange as a server would.
func serve(h http.Handler, w *responseWriter, r *http.Request, cancel context.CancelCauseFunc) {
	defer cancel(nil)
	defer r.Body.Close()
	finished := false
	defer func() {
		if finished {
			return
		}
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			panic(v)
		}
		w.abort()
	}()
	h.ServeHTTP(w, r)
	finished = true
	w.finish()
}

// serverRequest is req as a handler behind net/http's server would see it.
func serverRequest(ctx context.Context, req *http.Request, body io.ReadCloser) *http.Request {
	r := req.Clone(ctx)
	r.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	r.RequestURI = req.URL.RequestURI()
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	r.RemoteAddr = "192.0.2.1:1234"
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	r.GetBody = nil
	if body == nil {
		r.Body, r.ContentLength = http.NoBody, 0
	} else {
		r.Body = body
		if r.ContentLength == 0 {
			r.ContentLength = -1
		}
	}
	return r
}

// responseWriter streams a handler's response through a pipe. The head is
// handed over (ready closed) at the first Write, Flush or the handler's
// return; the fields it sets are read by RoundTrip only after that.
type responseWriter struct {
	mu     sync.Mutex
	header http.Header
	head   bool // a HEAD request: writes are discarded
	pw     *io.PipeWriter
	ready  chan struct{}
	sent   bool

	// Set before ready is closed.
	status        int
	sentHeader    http.Header
	contentLength int64
	abortErr      error
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent || w.status != 0 || code < 200 {
		return // superfluous, or 1xx, which is not supported
	}
	w.status = code
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !bodyAllowed(w.status) {
		w.mu.Unlock()
		return 0, http.ErrBodyNotAllowed
	}
	if !w.sent {
		if _, ok := w.header["Content-Type"]; !ok && len(p) > 0 && w.header.Get("Transfer-Encoding") == "" {
			w.header.Set("Content-Type", http.DetectContentType(p))
		}
		w.sendLocked(-1)
	}
	w.mu.Unlock()
	if w.head || len(p) == 0 {
		return len(p), nil
	}
	return w.pw.Write(p)
}

// Flush hands the response head over if it has not been yet; writes are
// never buffered.
func (w *responseWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.sendLocked(-1)
	}
}

// finish ends the response after the handler returned.
func (w *responseWriter) finish() {
	w.mu.Lock()
	if !w.sent {
		w.sendLocked(0)
	}
	w.mu.Unlock()
	w.pw.Close()
}

// abort ends the exchange after the handler panicked with
// http.ErrAbortHandler or exited its goroutine.
func (w *responseWriter) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.sent = true
		w.abortErr = ErrHandlerAborted
		close(w.ready)
	}
	w.pw.CloseWithError(io.ErrUnexpectedEOF)
}

// sendLocked fixes the head and hands it over. length is the body's length
// when known (0 for a handler that returned without writing), else -1.
func (w *responseWriter) sendLocked(length int64) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.sent = true
	w.sentHeader = w.header.Clone()
	w.contentLength = length
	if v := w.sentHeader.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		}
	}
	if !bodyAllowed(w.status) {
		w.contentLength = 0
	}
	close(w.ready)
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
