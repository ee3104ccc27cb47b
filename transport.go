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
)

// Transport is an http.RoundTripper that retries transient failures.
//
// The zero value is usable: it retries with the default Policy over a pooled
// transport of its own. A Transport is safe for concurrent use. Its fields
// are read once, at its first use (RoundTrip, Validate, Stats or
// CloseIdleConnections): set them all before, and do not change them
// after. Most callers want one Transport per process, set as the Transport
// of an http.Client, and a call to Validate at start-up, after the fields
// are set.
type Transport struct {
	// Base sends each attempt. Nil means a pooled transport from
	// go-cleanhttp, created once for this Transport. Layers that must run
	// once per attempt (request signing, auth, tracing) belong in Base.
	Base http.RoundTripper

	// Policy applies to requests that no key of Hosts matches, and is
	// what every entry of Hosts inherits.
	Policy Policy

	// Hosts holds policies per host and per endpoint. A key is a host
	// pattern — "host", "host:port" or "*.suffix" (any subdomain of suffix,
	// at any depth, but not suffix itself) — optionally followed by a path
	// prefix: "api.example.com/v1/search" applies to /v1/search and
	// everything below it, not to /v1/searches.
	//
	// The host chooses first, the most specific pattern first: "host:port",
	// then "host", then the wildcard with the longest suffix (one with a port
	// before one without). Within the first pattern that has a key matching
	// the request's path, the longest path prefix wins; the key without a
	// path matches every path. Keys are case-insensitive in the host and
	// case-sensitive in the path; a URL without a port matches "host:port"
	// keys with the scheme's default port.
	//
	// An entry inherits every field it leaves zero from the policy its host
	// would get without it: a key with a path from its host's entry, a host's
	// entry from Policy, Policy from the package defaults. Per-host settings
	// (NewBudget, Breaker, Overload) belong to keys without a path. An
	// invalid key or policy fails every request with ErrInvalidPolicy;
	// Validate lists them.
	Hosts map[string]Policy

	// Logger, if non-nil, receives one record per attempt: Debug for an
	// attempt that succeeds or a hedge that lost to a faster one, Info for
	// one that is retried, Warn for a failure that ends retrying; and a
	// Warn record for a retry or first attempt that was not sent (an
	// overload control, the breaker or PrepareRetry refused it). Nil means
	// silent. Records never carry userinfo, query values or header values,
	// not even inside error text.
	Logger *slog.Logger

	// OnAttempt, if non-nil, is called once for each attempt Base saw,
	// hedges included, with the decision taken about it, before any wait.
	// It runs on the RoundTrip goroutine and must not read or close the
	// response body or modify the request.
	OnAttempt func(Attempt)

	// OnCall, if non-nil, is called once per RoundTrip, just before it
	// returns, with a summary of the call: what was returned, how many
	// attempts it took, how long, and why it stopped. It also reports calls
	// that sent nothing, such as those an open breaker or an overload
	// control refused (Call.Stop says which). It runs on
	// the RoundTrip goroutine and must not read or close the response body.
	OnCall func(Call)

	once     sync.Once
	base     http.RoundTripper
	hosts    *hostTable
	states   hostStates
	creating sync.Mutex // held while a host's state is created
}

// Call describes one RoundTrip once it has ended, for Transport.OnCall.
type Call struct {
	Host     string         // the host's key, as Attempt.Host; "" for an invalid request
	Request  *http.Request  // the caller's request
	Response *http.Response // what RoundTrip returns; nil when Err is set
	Err      error          // what RoundTrip returns; nil when Response is set
	Attempts int            // attempts Base saw, hedges included
	Hedges   int            // attempts sent as hedges
	Duration time.Duration  // from the start of RoundTrip until it returned
	Stop     StopReason     // why the call stopped
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

// RoundTrip sends req and retries transient failures as its Policy allows.
// It returns the last response, untouched, when one was received, even if
// it is a failure such as a 503 after the last attempt; otherwise a
// *RetryError (see RetryError for the one exception). It never modifies
// req and always closes req.Body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	c := &callState{t: t, req: req, timed: t.OnAttempt != nil || t.OnCall != nil || t.Logger != nil}
	if c.timed {
		c.began = time.Now()
	}
	resp, err := c.roundTrip()
	if t.OnCall != nil {
		var d time.Duration
		if !c.began.IsZero() {
			d = time.Since(c.began)
		}
		t.OnCall(Call{Host: c.host, Request: req, Response: resp, Err: err,
			Attempts: c.sent, Hedges: c.hedges, Duration: d, Stop: c.stop})
	}
	return resp, err
}

// callState is one RoundTrip in progress.
type callState struct {
	t        *Transport
	req      *http.Request
	p        *policy
	h        hostPort
	host     string     // h as "host:port", when observers need it
	state    *hostState // nil until the host needs state
	body     body
	key      string
	timed    bool // observers want durations
	deadline bool // the caller's context has a deadline: attempts are timed to fit the next one before it
	began    time.Time
	delay    time.Duration     // the hedge delay; 0: no hedging
	learn    *latencyEstimator // the host's latency, fed by the first attempt; nil when the call does not learn

	sent, hedges int
	lastStatus   int
	lastErr      error          // the last attempt's error
	last         Attempt        // the last attempt, for PrepareRetry
	edited       *http.Request  // the request PrepareRetry last edited, for its round's hedges
	held         *http.Response // the last response, drained into memory, while its retry is not yet sent
	prevDelay    time.Duration  // the previous backoff delay, for decorrelated jitter
	reserved     bool           // a retry's cost is taken from the budget and not yet spent
	reservedTO   bool           // ... as a timeout retry
	timeoutRetry bool           // the last retry sent was charged as a timeout retry
	stop         StopReason
}

func (c *callState) roundTrip() (*http.Response, error) {
	req := c.req
	if err := checkRequest(req, c.t.Base == nil); err != nil {
		if req != nil {
			closeBody(req.Body)
		}
		return c.fail(&RetryError{Reason: StopInvalid, Err: err})
	}
	if err := c.t.hosts.err; err != nil {
		closeBody(req.Body)
		return c.fail(&RetryError{Reason: StopInvalid, Err: err})
	}
	ctx := req.Context()
	c.h = hostOf(req.URL)
	if c.timed {
		c.host = c.h.String()
	}
	if ctx.Err() != nil {
		closeBody(req.Body)
		return c.fail((&RetryError{Reason: StopContext, Err: context.Cause(ctx)}).contextEnded(ctx))
	}
	_, c.deadline = ctx.Deadline()
	c.p = c.t.hosts.lookup(c.h, req.URL.Path)
	if fs := overridesFrom(ctx); fs != nil {
		p, err := c.p.override(fs)
		if err != nil {
			closeBody(req.Body)
			return c.fail(&RetryError{Reason: StopInvalid, Err: err})
		}
		c.p = p
	}
	if c.host == "" && c.p.prepareRetry != nil {
		c.host = c.h.String() // PrepareRetry sees Attempt.Host
	}
	b, err := prepareBody(ctx, req, c.p.maxReplay)
	if err != nil {
		e := &RetryError{Reason: StopInvalid, Err: err}
		if ctx.Err() != nil {
			e.Reason = StopContext
			e.contextEnded(ctx)
		}
		return c.fail(e)
	}
	c.body = b
	if c.p.needsKey(req) {
		if c.key, err = c.p.key(); err != nil {
			closeBody(b.first)
			return c.fail(&RetryError{Reason: StopInvalid, Err: err})
		}
	}
	if c.p.stateful() {
		c.state = c.t.states.load(c.h)
		if c.state == nil && c.p.overload != nil {
			// The overload controls learn from every attempt: state now.
			c.state = c.newState()
		} else if c.state != nil {
			c.state.touch(time.Now())
		}
		if c.state != nil && c.state.budget != nil {
			c.state.budget.Begin()
		}
	}
	if c.p.hedges() {
		c.startHedging()
	}
	return c.run(ctx)
}

// fail ends the call with e.
func (c *callState) fail(e *RetryError) (*http.Response, error) {
	c.stop = e.Reason
	return nil, e
}

func (c *callState) run(ctx context.Context) (*http.Response, error) {
	rc := c.body.first
	var one attempt // the attempt in flight, when not hedging
	for {
		var (
			a   *attempt
			err error
		)
		if c.hedging() {
			a, err = c.sendHedged(ctx, rc)
		} else {
			a, err = &one, c.sendOne(ctx, rc, &one)
		}
		if err != nil {
			return c.refused(ctx, err)
		}
		c.decide(ctx, a)
		if a.Retry {
			next, berr := c.body.next(c.sent + 1)
			if berr != nil {
				c.unreserve()
				a.Retry, a.Delay, a.DelaySource, a.Stop = false, 0, DelayNone, StopNotReplayable
				if a.Err != nil {
					a.Err = errors.Join(a.Err, berr)
				}
			}
			rc = next
		}
		if a.Retry && a.Response != nil {
			// Drain the response now, so its connection is reused during the
			// wait, and keep it in memory in case the retry is not sent.
			c.held = drain(ctx, a.Response)
			a.drained = true
			a.end()
			if !fits(ctx, a.Delay, a) {
				c.unreserve()
				closeBody(rc)
				a.Retry, a.Delay, a.DelaySource, a.Stop = false, 0, DelayNone, StopDeadline
			}
		}
		c.observe(ctx, &a.Attempt)
		c.last = a.Attempt
		if !a.Retry {
			return c.finish(ctx, a)
		}
		discard(ctx, a.Response)
		a.end()
		if werr := backoff.Wait(ctx, a.Delay); werr != nil {
			c.unreserve()
			closeBody(rc)
			e := &RetryError{Attempts: c.sent, Err: a.Err, LastStatus: c.lastStatus, Reason: StopContext, Cause: werr}
			if errors.Is(werr, backoff.ErrDeadline) {
				e.Reason = StopDeadline
			}
			if ctx.Err() != nil {
				e.contextEnded(ctx)
			}
			return c.fail(e)
		}
	}
}

// finish ends the call after attempt a, which decided it.
func (c *callState) finish(ctx context.Context, a *attempt) (*http.Response, error) {
	c.stop = a.Stop
	if a.Stop == StopSuccess && c.state != nil && c.state.budget != nil {
		c.state.budget.Succeeded(c.sent-c.hedges > 1, c.timeoutRetry) // hedges are not the retry budget's
	}
	switch {
	case c.held != nil:
		return c.held, nil // drained, whole, before the retry was called off
	case a.Response != nil && !a.drained:
		a.handOver()
		return a.Response, nil
	}
	// No response, or one whose body was drained past what is kept: the
	// caller gets the error, never a response that cannot be read.
	a.end()
	e := &RetryError{Attempts: c.sent, Err: a.Err, LastStatus: c.lastStatus, Reason: a.Stop}
	switch a.Stop {
	case StopDeadline:
		e.Cause = backoff.ErrDeadline
	case StopBudget:
		e.Cause = ErrBudgetExhausted
	case StopBreaker:
		e.Cause = ErrCircuitOpen
	}
	if ctx.Err() != nil {
		e.contextEnded(ctx)
	}
	return nil, e
}

// refusal is an attempt that was not sent: an overload control, the
// breaker or PrepareRetry refused it, or (StopContext, StopDeadline) the
// caller's context ended, or was about to, while it waited for admission.
type refusal struct {
	reason StopReason
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

// refused ends the call when its next attempt was refused: with the
// response in hand if there is one, else with a RetryError. When the
// caller's context ended first, the response is not returned, as after a
// wait.
func (c *callState) refused(ctx context.Context, err error) (*http.Response, error) {
	c.unreserve()
	r := err.(*refusal)
	c.stop = r.reason
	if r.reason != StopContext && r.reason != StopDeadline {
		c.logRefusal(ctx, r)
	}
	if c.held != nil && ctx.Err() == nil {
		return c.held, nil
	}
	e := &RetryError{Attempts: c.sent, Err: c.lastErr, LastStatus: c.lastStatus, Reason: r.reason, Cause: r.err}
	if c.sent == 0 {
		e.Err, e.Cause = r.err, nil
	}
	if ctx.Err() != nil {
		e.contextEnded(ctx)
	}
	return nil, e
}

// sendOne makes the next attempt, a, with body rc.
func (c *callState) sendOne(ctx context.Context, rc io.ReadCloser, a *attempt) error {
	if err := c.prepare(ctx, rc, a, false, false); err != nil {
		return err
	}
	resp, err := c.t.base.RoundTrip(a.Request)
	fired := a.timer != nil && !a.timer.Stop()
	a.settle(resp, err, fired)
	c.classify(a)
	c.record(ctx, a)
	c.learnFrom(ctx, a)
	return nil
}

// prepare makes a the next attempt, with body rc, lets PrepareRetry see it
// when it is a retry, and asks the breaker. On a refusal it closes rc and
// returns a *refusal. cancelable gives the attempt a context of its own
// even without AttemptTimeout, as hedging needs.
func (c *callState) prepare(ctx context.Context, rc io.ReadCloser, a *attempt, cancelable, hedge bool) error {
	n := c.sent + 1
	ad, err := c.admit(ctx, hedge)
	if err != nil {
		closeBody(rc)
		return err
	}
	*a = attempt{Attempt: Attempt{Host: c.host, N: n, Hedge: hedge}, adm: ad}
	actx := ctx
	if c.p.attemptTimeout > 0 || cancelable {
		actx = a.withContext(ctx)
	}
	a.Request = c.attemptRequest(actx, n, rc, cancelable, hedge)
	if n > 1 && !hedge && c.p.prepareRetry != nil {
		if err := c.p.prepareRetry(c.last, a.Request); err != nil {
			closeBody(rc)
			a.end()
			a.adm.done(time.Now(), signalNone, nil, nil)
			return &refusal{StopRefused, err}
		}
		c.edited = a.Request // the hedges of this round carry its edits
	}
	if c.state != nil && c.state.breaker != nil {
		done, err := c.state.breaker.admit()
		if err != nil {
			c.state.breakerRefusals.Add(1)
			closeBody(rc)
			a.end()
			a.adm.done(time.Now(), signalNone, nil, nil)
			return &refusal{StopBreaker, err}
		}
		a.breakDone = done
	}
	a.startTimer(c.p.attemptTimeout)
	if timed := c.timed || c.deadline || (n == 1 && c.learn != nil); timed || a.adm.limited {
		now := time.Now()
		if timed {
			a.start = now
		}
		a.adm.sent(ctx, now, c.p.attemptTimeout)
	}
	c.sent++
	c.held = nil
	if n > 1 {
		c.reserved = false // the retry is sent: its cost is spent
		if c.state != nil {
			c.state.retries.Add(1)
		}
	}
	return nil
}

// classify sets the class of a settled attempt: Policy.Classify, then the
// should-retry hint, then the built-in rules.
func (c *callState) classify(a *attempt) {
	p := c.p
	a.Class = ClassDefault
	if p.classify != nil {
		a.Class = p.classify(a.Request, a.Response, a.Err)
	}
	if a.Class == ClassDefault {
		a.Class = p.hints.shouldRetry(a.Response)
	}
	if a.Class == ClassDefault {
		a.Class = classify(a.Request, a.Response, a.Err, p)
	}
}

// record keeps what the host's state learns from attempt a: the breaker's
// count, the statistics, and state for a host that failed for the first
// time. It runs on the RoundTrip goroutine.
func (c *callState) record(ctx context.Context, a *attempt) {
	if a.Response != nil {
		c.lastStatus = a.Response.StatusCode
	}
	c.lastErr = a.Err
	outcome := breakerOutcome(ctx, &a.Attempt)
	if c.state == nil && outcome == errBreakerFailure && c.p.stateful() {
		c.state = c.newState()
		if c.state.budget != nil {
			c.state.budget.Begin()
		}
		// The attempt was admitted by the fresh breaker this state starts
		// with; count it now.
		if a.breakDone == nil && c.state.breaker != nil {
			a.breakDone, _ = c.state.breaker.admit()
		}
	}
	if a.breakDone != nil {
		a.breakDone(outcome)
		a.breakDone = nil
	}
	if s := c.state; s != nil {
		now := time.Now()
		if a.adm.s != nil {
			sig := signalNone
			if !a.Lost {
				sig = loadSignal(ctx, a.Response, a.Err)
			}
			a.adm.done(now, sig, a.Response, &c.p.hints)
		}
		s.touch(now)
		s.attempts.Add(1)
		if outcome == errBreakerFailure || a.Class.retryable() {
			s.failed(a.Class, now)
		}
	}
}

// newState returns the host's state, creating it if it has none. Calls
// create one at a time, so that calls whose first failures come at once
// share one state and NewBudget is called once per host.
func (c *callState) newState() *hostState {
	if s := c.t.states.load(c.h); s != nil {
		return s
	}
	c.t.creating.Lock()
	defer c.t.creating.Unlock()
	return c.t.states.create(c.h, c.p, time.Now())
}

// decide fills in whether and when to retry after attempt a.
func (c *callState) decide(ctx context.Context, a *attempt) {
	p := c.p
	switch {
	case ctx.Err() != nil:
		if a.Err != nil {
			a.Class = ClassFatal
		}
		a.Stop = StopContext
		return
	case a.Class == ClassSuccess:
		a.Stop = StopSuccess
		return
	case !a.Class.retryable():
		a.Stop = StopFatal
		return
	case !c.body.replayable() || (a.Class == ClassTransient && !p.replayable(a.Request)):
		a.Stop = StopNotReplayable
		return
	case c.sent >= p.maxAttempts:
		a.Stop = StopAttempts
		return
	case c.state != nil && c.state.breaker.open():
		a.Stop = StopBreaker // the next attempt would be refused: keep this answer
		c.state.breakerRefusals.Add(1)
		return
	}
	d := p.backoff.Delay(c.sent, c.prevDelay, nil)
	c.prevDelay = d
	source := DelayBackoff
	if sd, src, ok := p.hints.serverDelay(a.Response, time.Now()); ok {
		if sd > p.maxRetryAfter {
			a.Stop = StopRetryAfter
			return
		}
		// Never earlier than asked; up to 10 % later, so clients told the
		// same value do not all return in the same instant.
		if w := sd + time.Duration(float64(sd)/10*rand.Float64()); w >= d {
			d, source = w, src
		}
	}
	if !fits(ctx, d, a) {
		a.Stop = StopDeadline
		return
	}
	if !c.reserve(errors.Is(a.Err, ErrAttemptTimeout)) {
		a.Stop = StopBudget
		return
	}
	a.Retry, a.Delay, a.DelaySource = true, d, source
}

// fits reports whether a wait of d, and then another attempt as long as a
// took, end before ctx's deadline: a retry that cannot finish in time would
// only trade the response in hand for a deadline error.
func fits(ctx context.Context, d time.Duration, a *attempt) bool {
	return backoff.Fits(ctx, d+a.Duration)
}

// reserve takes the cost of the next retry from the budget, if the host
// has one.
func (c *callState) reserve(timeout bool) bool {
	if c.state == nil || c.state.budget == nil {
		return true
	}
	if !c.state.budget.AllowRetry(timeout) {
		c.state.budgetRefusals.Add(1)
		return false
	}
	c.reserved, c.reservedTO, c.timeoutRetry = true, timeout, timeout
	return true
}

// unreserve gives back the cost of a retry that will not be sent.
func (c *callState) unreserve() {
	if c.reserved {
		c.reserved = false
		c.state.budget.Refund(c.reservedTO)
	}
}

// attemptRequest returns the request for attempt n with body rc: a clone
// of the caller's request when anything changes its header or several
// attempts are in flight at once (a hedged round), else a shallow copy. A
// hedge is made from the request PrepareRetry edited for its round.
func (c *callState) attemptRequest(ctx context.Context, n int, rc io.ReadCloser, concurrent, hedge bool) *http.Request {
	ctx = &attemptContext{Context: ctx, n: n}
	src := c.req
	if hedge && c.edited != nil {
		src = c.edited
	}
	var areq *http.Request
	if c.key != "" || c.p.attemptHeader != "" || (n > 1 && c.p.prepareRetry != nil) || concurrent {
		areq = src.Clone(ctx)
		if c.key != "" {
			areq.Header[c.p.keyHeader] = []string{c.key}
		}
		if c.p.attemptHeader != "" {
			areq.Header[c.p.attemptHeader] = []string{strconv.Itoa(n)}
		}
	} else {
		areq = src.WithContext(ctx)
	}
	areq.Body = rc
	areq.GetBody = c.body.getBody
	return areq
}
