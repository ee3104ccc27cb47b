package httpretry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

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
