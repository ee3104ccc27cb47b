package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"
)

// Attempt describes one attempt that Base saw, and what RoundTrip decided
// after it. Transport.OnAttempt receives one per attempt, hedges included.
type Attempt struct {
	Host     string         // the host's key for per-host state: lower-case "host:port", the scheme's default port filled in
	N        int            // attempt number, 1 for the first
	Request  *http.Request  // the attempt's request as sent: a clone of the caller's, with its idempotency key
	Response *http.Response // the response, nil when Err is set
	Err      error          // the attempt's error, nil when Response is set
	Class    Class          // how the outcome was classified
	Duration time.Duration  // from sending the request to receiving the response header or the error; 0 when not measured (nothing observes attempts and the caller's context has no deadline)
	Hedge    bool           // sent alongside an earlier attempt that had not answered (see HedgePolicy)
	Lost     bool           // cancelled unanswered because another attempt of its round answered first
	Retry    bool           // another attempt follows after Delay
	Delay    time.Duration  // the wait before the next attempt, when Retry
	// DelaySource says where Delay came from, when Retry.
	DelaySource DelaySource
	Stop        StopReason // why the call stopped after this attempt; StopNone when it did not
}

// DelaySource says where the wait before a retry came from.
type DelaySource int

const (
	DelayNone        DelaySource = iota // no retry follows
	DelayBackoff                        // the policy's backoff strategy
	DelayRetryAfter                     // the response's Retry-After header
	DelayRateLimit                      // the RateLimit header field's t parameter
	DelayResetHeader                    // the header named by HintPolicy.ResetHeader
)

var delayNames = [...]string{"none", "backoff", "retry-after", "ratelimit", "ratelimit-reset"}

// String returns the source's name as used in logs and metrics.
func (s DelaySource) String() string {
	if s >= 0 && int(s) < len(delayNames) {
		return delayNames[s]
	}
	return "DelaySource(" + strconv.Itoa(int(s)) + ")"
}

// attemptKey is the context key under which the attempt number travels.
type attemptKey struct{}

// attemptContext carries the attempt number to the layers under the
// Transport. It is one allocation, where context.WithValue plus a boxed int
// would be two. It also notes whether net/http's client began to handle the
// attempt, which it does by looking up the request's httptrace.ClientTrace
// before anything else: an error it returns then comes from the connection,
// not from a layer of the caller's in between.
type attemptContext struct {
	context.Context
	n       int
	reached atomic.Bool
}

func (c *attemptContext) Value(key any) any {
	switch key {
	case attemptKey{}:
		return c
	case traceKey:
		c.reached.Store(true)
	}
	return c.Context.Value(key)
}

// traceKey is the context key httptrace uses for a ClientTrace, learnt
// once from httptrace itself: it is unexported.
var traceKey = func() any {
	var probe keyProbe
	httptrace.ContextClientTrace(&probe)
	return probe.key
}()

// keyProbe is a context that remembers the key it is asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// reachedHTTP reports whether net/http's client began to handle req, an
// attempt of a Transport.
func reachedHTTP(req *http.Request) bool {
	if req == nil {
		return false
	}
	c, ok := req.Context().Value(attemptKey{}).(*attemptContext)
	return ok && c.reached.Load()
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

// errLost ends the context of an attempt that another attempt of its round
// beat; it is the Err of an Attempt with Lost set.
var errLost = errors.New("httpretry: cancelled, another attempt answered first")

// attempt is one attempt in flight: what observers see, and what the
// Transport needs to end its life.
type attempt struct {
	Attempt
	start     time.Time               // when it was sent; zero when nothing times attempts
	ctx       context.Context         // the attempt's own context; nil without AttemptTimeout or hedging
	cancel    context.CancelCauseFunc // ends ctx
	timer     *time.Timer             // AttemptTimeout's timer, nil without one
	breakDone func(error)             // reports the outcome to the breaker; nil without one
	adm       admission               // what the host's overload controls gave it
	drained   bool                    // the response's body was drained and closed
}

// withContext gives a its own cancellable context under parent.
func (a *attempt) withContext(parent context.Context) context.Context {
	a.ctx, a.cancel = context.WithCancelCause(parent)
	return a.ctx
}

// startTimer bounds the attempt by d, when d > 0. The timeout covers
// sending the request and receiving the response header; once RoundTrip
// has a response, only closing its body (or discarding it) ends the
// context, so a slow body still streams in full.
func (a *attempt) startTimer(d time.Duration) {
	if d > 0 && a.cancel != nil {
		cancel := a.cancel
		a.timer = time.AfterFunc(d, func() { cancel(ErrAttemptTimeout) })
	}
}

// settle records what Base returned. fired reports that the attempt's
// timer had fired by the time Base returned: the attempt then timed out
// whatever Base returned, since its context is cancelled and a response
// that raced the timer could not be read.
func (a *attempt) settle(resp *http.Response, err error, fired bool) {
	err = checkError(err)
	if !a.start.IsZero() {
		a.Duration = time.Since(a.start)
	}
	if fired {
		if resp != nil {
			closeBody(resp.Body)
			resp = nil
		}
		err = timeoutError(err)
	}
	if err != nil && resp != nil {
		closeBody(resp.Body) // a broken Base; the error wins, as in http.Client
		resp = nil
	}
	if resp == nil && err == nil {
		err = errors.New("httpretry: Base returned neither a response nor an error")
	}
	a.Response, a.Err = resp, err
}

// handOver ties the attempt's context to the body of the response returned
// to the caller: it ends when the body is closed.
func (a *attempt) handOver() {
	if a.cancel == nil {
		return
	}
	resp := a.Response
	if resp.Body == nil || resp.Body == http.NoBody {
		a.cancel(nil)
		return
	}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = &cancelRWBody{rw, a.cancel}
		return
	}
	resp.Body = &cancelBody{resp.Body, a.cancel}
}

// lose ends the context of an attempt that another attempt beat.
func (a *attempt) lose() {
	if a.cancel != nil {
		a.cancel(errLost)
	}
}

// end ends the attempt's context at once, for an attempt whose response is
// not returned.
func (a *attempt) end() {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.cancel != nil {
		a.cancel(nil)
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

// timeoutError describes an attempt that AttemptTimeout cut short when
// Base reported the cancellation in its own words.
func timeoutError(err error) error {
	if err == nil || errors.Is(err, ErrAttemptTimeout) {
		return ErrAttemptTimeout
	}
	return fmt.Errorf("%w (%v)", ErrAttemptTimeout, err)
}
