package httpretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// attemptKey is the context key under which the attempt number travels.
type attemptKey struct{}

// attemptContext carries the attempt number to the layers under the
// Transport. It is one allocation, where context.WithValue plus a boxed int
// would be two.
type attemptContext struct {
	context.Context
	n int
}

func (c *attemptContext) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// AttemptFromContext returns the attempt number (1 for the first attempt,
// 2 for the first retry, …) that a Transport put in the context of the
// request it passes to its Base. It reports false for a context that did
// not come from a Transport. OpenTelemetry's http.request.resend_count is
// the attempt number minus one.
func AttemptFromContext(ctx context.Context) (int, bool) {
	if c, ok := ctx.Value(attemptKey{}).(*attemptContext); ok {
		return c.n, true
	}
	return 0, false
}

// ErrAttemptTimeout is the error of an attempt that Policy.AttemptTimeout
// cut short. It is transient, and errors.Is reports it as
// context.DeadlineExceeded too.
var ErrAttemptTimeout error = attemptTimeoutError{}

type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string        { return "httpretry: attempt timed out" }
func (attemptTimeoutError) Timeout() bool        { return true }
func (attemptTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// attemptDone ends the life of one attempt's context. The zero value, used
// when there is no AttemptTimeout, does nothing.
type attemptDone struct {
	ctx   context.Context
	stop  context.CancelCauseFunc
	timer *time.Timer
}

// withAttemptTimeout derives the context of one attempt. The timeout covers
// sending the request and receiving the response header; once RoundTrip has
// a response, only closing its body (or discarding it) ends the context, so
// a slow body still streams in full.
//
// With d = 0 the context has no timeout, only the cancellation that hedging
// needs to stop the attempts that lost.
func withAttemptTimeout(parent context.Context, d time.Duration) (context.Context, attemptDone) {
	ctx, cancel := context.WithCancelCause(parent)
	var timer *time.Timer
	if d > 0 {
		timer = time.AfterFunc(d, func() { cancel(ErrAttemptTimeout) })
	}
	return ctx, attemptDone{ctx: ctx, stop: cancel, timer: timer}
}

// settle stops the timeout once Base has answered and, if the timeout is
// what ended the attempt, reports that instead of Base's cancellation error.
func (d attemptDone) settle(resp *http.Response, err error) error {
	if d.timer == nil {
		return err
	}
	d.timer.Stop()
	if err != nil && context.Cause(d.ctx) == ErrAttemptTimeout && d.ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ErrAttemptTimeout, err)
	}
	return err
}

// handOver ties the attempt's context to the returned response body.
func (d attemptDone) handOver(resp *http.Response) {
	if d.stop == nil {
		return
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		d.stop(nil)
		return
	}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = &cancelRWBody{rw, d.stop}
		return
	}
	resp.Body = &cancelBody{resp.Body, d.stop}
}

// lose ends the context of an attempt that a faster hedge beat.
func (d attemptDone) lose() {
	if d.stop != nil {
		d.stop(ErrHedgeLost)
	}
}

// lost reports whether lose ended the attempt.
func (d attemptDone) lost() bool {
	return d.ctx != nil && d.ctx.Err() != nil && context.Cause(d.ctx) == ErrHedgeLost
}

// cancel ends the attempt's context at once.
func (d attemptDone) cancel() {
	if d.stop != nil {
		d.stop(nil)
	}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// cancelRWBody keeps the body writable for 101 Switching Protocols.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}

// checkRequest rejects what no attempt could send, so that the failure is a
// clear ErrInvalidRequest rather than a retried transport error. The scheme
// is checked only when the Transport owns its Base, since a custom Base may
// speak others.
func checkRequest(req *http.Request, ownBase bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	switch {
	case req == nil:
		return bad("nil request")
	case req.URL == nil:
		return bad("nil URL")
	case req.URL.Host == "":
		return bad("no host in URL")
	case ownBase && req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return bad("unsupported scheme %q", req.URL.Scheme)
	case req.Method != "" && !validToken(req.Method):
		return bad("invalid method %q", req.Method)
	case (req.Body == nil || req.Body == http.NoBody) && req.ContentLength > 0:
		return bad("ContentLength is %d but there is no body", req.ContentLength)
	}
	for name, values := range req.Header {
		if !validToken(name) {
			return bad("invalid header name %q", name)
		}
		for _, v := range values {
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return bad("invalid value for header %q", name)
			}
		}
	}
	return nil
}
