package httpretrytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/seedhq/httpretry"
)

// DefaultKeyHeader is the header a [Script] or [HandlerTransport] reads
// the idempotency key from when its KeyHeader is empty.
const DefaultKeyHeader = "Idempotency-Key"

// Request is what a [Script] or a [HandlerTransport] saw of one request,
// and what it answered.
type Request struct {
	Method string
	// URL and Header are copies of the request's; each Requests call
	// copies them again, so editing them changes no other Request.
	URL    *url.URL
	Header http.Header
	// Body holds the request body's bytes as they were read: all of them
	// for a Script, which reads the body before it answers; as many as the
	// handler has read so far for a HandlerTransport. Nil without a body.
	Body    []byte
	GetBody bool // the request had a GetBody function, so it could be replayed
	// Attempt is the attempt number httpretry put in the request's context
	// (1 for the first attempt); 0 when the request did not come through an
	// httpretry.Transport.
	Attempt int
	Key     string    // the idempotency key header's value, "" if none
	Time    time.Time // when RoundTrip was called, on the caller's clock

	// Status is the status code of the response handed back, 0 when there
	// was none (yet).
	Status int
	// Err is the error RoundTrip returned, nil when it returned a response
	// (or has not returned yet).
	Err error
	// ResponseBody is the body of the response handed back, nil when there
	// was none (yet). Its counts are live: they change as the receiver
	// reads and closes it.
	ResponseBody *Body
	// ContextErr is the cause of the end of the request's context if it had
	// ended by the time the answer was given, nil otherwise: an attempt
	// that httpretry cancelled (an attempt timeout, a hedge that lost) has
	// one, even when a [Outcome.RespondOnCancel] answered it anyway.
	ContextErr error
}

// recorder keeps the requests a fake upstream saw, in the order they came.
type recorder struct {
	mu   sync.Mutex
	reqs []*Request
}

func (r *recorder) begin(req *http.Request, keyHeader string) *Request {
	if keyHeader == "" {
		keyHeader = DefaultKeyHeader
	}
	n, _ := httpretry.AttemptFromContext(req.Context())
	e := &Request{
		Method:  req.Method,
		URL:     cloneURL(req.URL),
		Header:  req.Header.Clone(),
		GetBody: req.GetBody != nil,
		Attempt: n,
		Key:     req.Header.Get(keyHeader),
		Time:    time.Now(),
	}
	if e.Method == "" {
		e.Method = http.MethodGet
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, e)
	r.mu.Unlock()
	return e
}

// answered records the outcome of e, a request made with ctx.
func (r *recorder) answered(ctx context.Context, e *Request, status int, body *Body, err error) {
	var ctxErr error
	if ctx.Err() != nil {
		ctxErr = context.Cause(ctx)
	}
	r.mu.Lock()
	e.Status, e.ResponseBody, e.Err, e.ContextErr = status, body, err, ctxErr
	r.mu.Unlock()
}

// snapshot copies every request seen so far, deeply enough that the
// caller may edit what it gets (URL, Header, Body) without changing what
// the recorder holds. ResponseBody stays shared: its counts are live.
func (r *recorder) snapshot() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Request, len(r.reqs))
	for i, e := range r.reqs {
		out[i] = *e
		out[i].URL = cloneURL(e.URL)
		out[i].Header = e.Header.Clone()
		out[i].Body = bytes.Clone(e.Body)
	}
	return out
}

// cloneURL copies u and its user info, which a shallow copy would share.
func cloneURL(u *url.URL) *url.URL {
	c := *u
	if c.User != nil {
		user := *c.User
		c.User = &user
	}
	return &c
}

// body wraps a request body so that its bytes are recorded in e as they
// are read. It returns nil for no body.
func (r *recorder) body(e *Request, rc io.ReadCloser) io.ReadCloser {
	if rc == nil || rc == http.NoBody {
		return nil
	}
	return &recordedBody{rc: rc, r: r, e: e}
}

type recordedBody struct {
	rc io.ReadCloser
	r  *recorder
	e  *Request
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.r.mu.Lock()
	if b.e.Body == nil {
		b.e.Body = []byte{}
	}
	b.e.Body = append(b.e.Body, p[:n]...)
	b.r.mu.Unlock()
	return n, err
}

func (b *recordedBody) Close() error { return b.rc.Close() }

// errNilURL refuses a request without a URL, as net/http's Transport does,
// closing its body.
func errNilURL(req *http.Request) error {
	if req.Body != nil {
		req.Body.Close()
	}
	return errors.New("httpretrytest: nil Request.URL")
}
