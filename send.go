package httpretry

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

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
