package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seedhq/httpretry/backoff"
	"github.com/sony/gobreaker/v2"
)

// Transport is an http.RoundTripper that retries transient failures.
//
// The zero value is usable: it retries with the default Policy over a pooled
// transport of its own. A Transport is safe for concurrent use; do not modify
// its fields after first use. Most callers want one Transport per process,
// set as the Transport of an http.Client.
type Transport struct {
	// Base sends each attempt. Nil means a pooled transport from
	// go-cleanhttp, created once for this Transport. Layers that must run
	// once per attempt (request signing, auth, tracing) belong in Base.
	Base http.RoundTripper

	// Policy applies to hosts without an entry in Hosts.
	Policy Policy

	// Hosts holds per-host policies keyed by "host", "host:port" or
	// "*.suffix" (any subdomain of suffix, at any depth, but not suffix
	// itself). The most specific key wins: "host:port", then "host", then
	// the wildcard with the longest suffix (with a port before without),
	// then Policy. Keys are case-insensitive; a URL without a port matches
	// "host:port" keys with the scheme's default port. An invalid key or
	// policy fails every request with ErrInvalidPolicy.
	Hosts map[string]Policy

	// Logger, if non-nil, receives one record per attempt: Debug for an
	// attempt that succeeds or a hedge that lost to a faster one, Info for
	// one that is retried, Warn for a failure that ends retrying. Nil means silent. Records never carry
	// userinfo, query values, or header values.
	Logger *slog.Logger

	// OnAttempt, if non-nil, is called after each attempt with the decision
	// taken about it, before any wait. It runs on the RoundTrip goroutine
	// and must not read or close the response body or modify the request.
	OnAttempt func(Attempt)

	once     sync.Once
	base     http.RoundTripper
	hosts    *hostTable
	budgets  sync.Map // "host:port" → Budget (nil when the policy has none)
	breakers sync.Map // "host:port" → *breaker
}

// Attempt describes one attempt and what RoundTrip decided after it.
type Attempt struct {
	Request  *http.Request  // the attempt's request, with its idempotency key
	N        int            // attempt number, 1 for the first
	Response *http.Response // the response, nil when Err is set
	Err      error          // the attempt's error, nil when Response is set
	Class    Class          // how the outcome was classified; ClassDefault for a hedge cancelled unanswered
	Retry    bool           // another attempt follows after Delay
	Delay    time.Duration  // the wait before the next attempt, when Retry
	// DelaySource names where Delay came from: "backoff", "retry-after",
	// "ratelimit" (the RateLimit header field) or "ratelimit-reset" (the
	// policy's reset header).
	DelaySource string
	Stop        StopReason // why retrying stopped, StopNone when Retry
}

func (t *Transport) init() {
	t.once.Do(func() {
		t.base = t.Base
		if t.base == nil {
			t.base = cleanhttp.DefaultPooledTransport()
		}
		t.hosts = compileHosts(t.Policy, t.Hosts)
	})
}

// CloseIdleConnections closes the idle connections of Base, if Base has
// such a method. Only an explicit call closes them: RoundTrip never does.
func (t *Transport) CloseIdleConnections() {
	t.init()
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req and retries transient failures as its host's Policy
// allows. It returns the last response, untouched, when one was received,
// even if it is a failure such as a 503 after the last attempt; otherwise a
// *RetryError. It never modifies req and always closes req.Body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	if err := checkRequest(req, t.Base == nil); err != nil {
		closeBody(req)
		return nil, &RetryError{Reason: StopInvalid, Err: err}
	}
	if t.hosts.err != nil {
		closeBody(req)
		return nil, &RetryError{Reason: StopInvalid, Err: t.hosts.err}
	}
	ctx := req.Context()
	if ctx.Err() != nil {
		closeBody(req)
		return nil, &RetryError{Reason: StopContext, Err: context.Cause(ctx)}
	}
	p := t.hosts.lookup(req.URL)
	b, err := prepareBody(req, p.maxReplay)
	if err != nil {
		return nil, &RetryError{Reason: StopInvalid, Err: err}
	}
	r := &call{t: t, p: p, req: req, body: b, budget: t.budget(p, req.URL), breaker: t.breaker(p, req.URL)}
	if p.needsKey(req) {
		key, ok := p.key()
		if !ok {
			closeReader(b.first)
			return nil, &RetryError{Reason: StopInvalid,
				Err: errors.New("httpretry: invalid policy: Keys.New returned an empty key or one with control characters")}
		}
		r.key = key
	}
	return r.run(ctx)
}

// call is one RoundTrip in progress.
type call struct {
	t       *Transport
	p       *policy
	req     *http.Request
	body    body
	key     string
	budget  Budget   // nil: no budget
	breaker *breaker // nil: no breaker
}

// outcome is one attempt: its request, what Base returned, and how it was
// classified.
type outcome struct {
	n         int
	areq      *http.Request
	resp      *http.Response
	err       error
	class     Class
	done      attemptDone
	breakDone func(error) // reports the outcome to the breaker; nil without one
	refused   bool        // the breaker refused: nothing was sent
}

func (c *call) run(ctx context.Context) (*http.Response, error) {
	var (
		prev         time.Duration // the previous backoff delay, for decorrelated jitter
		lastStatus   int
		rc           = c.body.first
		sent         int  // attempts launched so far
		timeoutRetry bool // the last retry was charged as one after a timeout
		o            outcome
	)
	var began time.Time // left zero for budgets that never read the clock
	if c.budget != nil {
		if _, ok := c.budget.(clockless); !ok {
			began = time.Now()
		}
		c.budget.Begin(began)
	}
	for {
		if c.hedging() {
			o, sent = c.sendHedged(ctx, sent, rc)
		} else {
			sent++
			o = c.send(ctx, sent, rc)
		}
		if o.refused {
			return nil, &RetryError{Attempts: sent - 1, Err: o.err, LastStatus: lastStatus, Reason: StopBreaker}
		}
		if o.resp != nil {
			lastStatus = o.resp.StatusCode
		}

		a := Attempt{Request: o.areq, N: o.n, Response: o.resp, Err: o.err, Class: o.class}
		d := c.decide(ctx, &a, sent, &prev)
		if a.Stop == StopSuccess && c.budget != nil {
			now := began // a first-attempt success needs no second clock read
			if sent > 1 && !began.IsZero() {
				now = time.Now()
			}
			c.budget.Succeeded(now, sent > 1, timeoutRetry)
		}
		if a.Retry {
			timeoutRetry = errors.Is(a.Err, ErrAttemptTimeout)
			next, berr := c.body.next(sent + 1)
			if berr != nil {
				a.Retry, a.Stop = false, StopNotReplayable
				a.Err = errors.Join(a.Err, berr)
			}
			rc = next
		}
		c.t.observe(ctx, &a, c.budget)
		if !a.Retry {
			if o.resp != nil {
				o.done.handOver(o.resp)
				return o.resp, nil
			}
			o.done.cancel()
			return nil, &RetryError{Attempts: sent, Err: a.Err, LastStatus: lastStatus, Reason: a.Stop, Cause: stopCause(ctx, a.Stop)}
		}
		discard(o.resp)
		o.done.cancel()
		if werr := backoff.Wait(ctx, d); werr != nil {
			closeReader(rc)
			reason := StopContext
			if errors.Is(werr, backoff.ErrDeadline) {
				reason = StopDeadline
			}
			return nil, &RetryError{Attempts: sent, Err: a.Err, LastStatus: lastStatus, Reason: reason, Cause: werr}
		}
	}
}

// send makes attempt n with body rc.
func (c *call) send(ctx context.Context, n int, rc io.ReadCloser) outcome {
	o, ok := c.prepare(ctx, n, rc, false)
	if !ok {
		return o
	}
	o.resp, o.err = c.t.base.RoundTrip(o.areq)
	finish(ctx, c.p, &o)
	return o
}

// prepare asks the breaker for attempt n and builds its request. When the
// breaker refuses, it closes rc and reports false; the outcome then has no
// request and its error wraps ErrCircuitOpen.
func (c *call) prepare(ctx context.Context, n int, rc io.ReadCloser, cancelable bool) (outcome, bool) {
	breakDone, err := admit(c.breaker)
	if err != nil {
		closeReader(rc)
		return outcome{n: n, err: err, class: ClassFatal, refused: true}, false
	}
	areq, done := c.attemptRequest(ctx, n, rc, cancelable)
	return outcome{n: n, areq: areq, done: done, breakDone: breakDone}, true
}

// finish settles what Base returned for o, classifies it under policy p and
// reports it to the breaker. It may run on a hedge's goroutine.
func finish(ctx context.Context, p *policy, o *outcome) {
	o.err = o.done.settle(o.resp, o.err)
	if o.err != nil && o.done.lost() {
		o.err = ErrHedgeLost
	}
	if o.err != nil && o.resp != nil {
		closeReader(o.resp.Body) // a broken Base; the error wins, as in http.Client
		o.resp = nil
	}
	if o.resp == nil && o.err == nil {
		o.err = errors.New("httpretry: Base returned neither a response nor an error")
	}
	o.class = ClassDefault
	if p.classify != nil {
		o.class = p.classify(o.areq, o.resp, o.err)
	}
	if o.class == ClassDefault {
		o.class = p.hints.shouldRetry(o.resp)
	}
	if o.class == ClassDefault {
		o.class = Classify(o.areq, o.resp, o.err)
	}
	if o.breakDone != nil {
		o.breakDone(breakerOutcome(ctx, o))
	}
}

// decide classifies the attempt in a and fills in whether and when to retry.
// It returns the delay.
func (c *call) decide(ctx context.Context, a *Attempt, sent int, prev *time.Duration) time.Duration {
	p := c.p
	if ctx.Err() != nil {
		a.Class, a.Stop = ClassFatal, StopContext
		return 0
	}
	switch {
	case a.Class == ClassSuccess:
		a.Stop = StopSuccess
		return 0
	case !a.Class.retryable():
		a.Stop = StopFatal
		return 0
	case !c.body.replayable() || (a.Class == ClassTransient && !p.replayable(a.Request)):
		a.Stop = StopNotReplayable
		return 0
	case sent >= p.maxAttempts:
		a.Stop = StopAttempts
		return 0
	case c.breaker != nil && c.breaker.State() == gobreaker.StateOpen:
		a.Stop = StopBreaker // the next attempt would be refused: keep this answer
		return 0
	}
	d := p.backoff.Delay(sent, *prev, nil)
	*prev = d
	a.DelaySource = "backoff"
	if sd, source, ok := p.hints.serverDelay(a.Response, time.Now()); ok {
		if sd > p.maxRetryAfter {
			a.Stop = StopRetryAfter
			return 0
		}
		// Never earlier than asked; up to 10 % later, so clients told the
		// same value do not all return in the same instant.
		if w := sd + time.Duration(float64(sd)/10*rand.Float64()); w >= d {
			d, a.DelaySource = w, source
		}
	}
	if !backoff.Fits(ctx, d) {
		a.Stop = StopDeadline
		return 0
	}
	if c.budget != nil && !c.budget.AllowRetry(time.Now(), errors.Is(a.Err, ErrAttemptTimeout)) {
		a.Stop = StopBudget
		return 0
	}
	a.Retry, a.Delay = true, d
	return d
}

// stopCause returns what ended retrying when that is not the last error.
func stopCause(ctx context.Context, r StopReason) error {
	switch r {
	case StopContext:
		return context.Cause(ctx)
	case StopDeadline:
		return backoff.ErrDeadline
	case StopBudget:
		return ErrBudgetExhausted
	}
	return nil
}

// attemptRequest returns the request for attempt n with body rc.
func (c *call) attemptRequest(ctx context.Context, n int, rc io.ReadCloser, cancelable bool) (*http.Request, attemptDone) {
	var done attemptDone
	if c.p.attemptTimeout > 0 || cancelable {
		ctx, done = withAttemptTimeout(ctx, c.p.attemptTimeout)
	}
	ctx = &attemptContext{ctx, n}
	var areq *http.Request
	if c.key != "" || c.p.attemptHeader != "" {
		areq = c.req.Clone(ctx)
		if c.key != "" {
			areq.Header[c.p.keyHeader] = []string{c.key}
		}
		if c.p.attemptHeader != "" {
			areq.Header[c.p.attemptHeader] = []string{strconv.Itoa(n)}
		}
	} else {
		areq = c.req.WithContext(ctx)
	}
	areq.Body = rc
	areq.GetBody = c.body.getBody
	return areq, done
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}

func closeReader(rc io.ReadCloser) {
	if rc != nil {
		rc.Close()
	}
}
