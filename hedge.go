package httpretry

import (
	"context"
	"io"
	"net/http"
	"slices"
	"time"
)

// HedgePolicy configures hedged requests: when an attempt has not answered
// after Delay, another is sent alongside it, and the first acceptable answer
// (one that would not be retried) wins. The others are cancelled and their
// bodies closed. Hedging trades extra load for lower tail latency, so it
// applies only to requests that are safe to send twice (idempotent methods
// or keyed requests, with a replayable body). Every hedge carries the same
// idempotency key and its own body, counts toward MaxAttempts, and is
// charged to the retry budget and admitted by the breaker like a retry.
//
// The zero value sends no hedges. In Hosts and WithPolicy, a zero
// HedgePolicy inherits and a non-zero one replaces the inherited one as a
// whole.
type HedgePolicy struct {
	// Delay is how long an attempt may go unanswered before a hedge is
	// sent. 0 means no hedging. A negative value is invalid.
	Delay time.Duration

	// MaxHedges is the most attempts sent alongside the first of a round.
	// 0 means 1. It is bounded by MaxAttempts − 1. A negative value is
	// invalid.
	MaxHedges int

	// Disabled means no hedging, even where the policy would inherit it.
	Disabled bool
}

// hedging reports whether this call sends hedges.
func (c *callState) hedging() bool {
	return c.p.hedgeDelay > 0 && c.sent < c.p.maxAttempts-1 && c.body.replayable() &&
		(c.key != "" || c.p.replayable(c.req))
}

// result is what Base returned for a hedged attempt.
type result struct {
	a     *attempt
	resp  *http.Response
	err   error
	fired bool // the attempt's timeout had fired when Base returned
}

// sendHedged runs one round of hedged attempts, starting with body rc. It
// returns the attempt that stands for the round: the first acceptable
// answer, or, when every attempt of the round failed in a way worth
// retrying, the last failure; the others are reported here. Cancelled
// attempts are reaped in the background, where their bodies are closed;
// they end as soon as Base honours the cancellation.
func (c *callState) sendHedged(ctx context.Context, rc io.ReadCloser) (*attempt, error) {
	limit := min(c.sent+1+c.p.maxHedges, c.p.maxAttempts)
	results := make(chan result, limit-c.sent)
	var inflight []*attempt // launched, not yet answered
	base := c.t.base
	launch := func(a *attempt) {
		inflight = append(inflight, a)
		go func() {
			resp, err := base.RoundTrip(a.Request)
			results <- result{a, resp, err, a.timer != nil && !a.timer.Stop()}
		}()
	}
	first := new(attempt) // shared with the goroutine that sends it
	if err := c.prepare(ctx, rc, first, true, false); err != nil {
		return nil, err
	}
	launch(first)
	timer := time.NewTimer(c.p.hedgeDelay)
	defer timer.Stop()
	for {
		select {
		case r := <-results:
			a := r.a
			inflight = slices.DeleteFunc(inflight, func(x *attempt) bool { return x == a })
			a.settle(r.resp, r.err, r.fired)
			c.classify(a)
			c.record(ctx, a)
			if len(inflight) == 0 || !a.Class.retryable() {
				c.abandon(ctx, inflight, results, nil)
				return a, nil
			}
			// Others are still out: this failure is reported and discarded,
			// and the round goes on.
			c.observe(ctx, &a.Attempt)
			discard(a.Response)
			a.end()
		case <-timer.C:
			if c.sent >= limit || ctx.Err() != nil {
				continue
			}
			c.ensureState()
			if !c.reserve(false) {
				continue
			}
			body, err := c.body.next(c.sent + 1)
			if err != nil {
				c.unreserve()
				continue
			}
			h := new(attempt)
			if err := c.prepare(ctx, body, h, true, true); err != nil {
				c.unreserve()
				continue // the breaker refused the hedge; the round goes on without it
			}
			c.hedges++
			launch(h)
			timer.Reset(c.p.hedgeDelay)
		case <-ctx.Done():
			// The newest attempt stands for the round in RoundTrip's own
			// report; the others are reported here.
			last := inflight[len(inflight)-1]
			stand := &attempt{Attempt: c.cut(last, ctx)}
			c.abandon(ctx, inflight, results, ctx)
			c.lastErr = stand.Err
			return stand, nil
		}
	}
}

// ensureState creates the host's state, which a hedge is charged to.
func (c *callState) ensureState() {
	if c.state == nil && c.p.stateful() {
		c.state = c.t.states.create(c.h, c.p, time.Now())
		if c.state.budget != nil {
			c.state.budget.Begin()
		}
	}
}

// cut describes attempt a, still in flight, as ended by ctx.
func (c *callState) cut(a *attempt, ctx context.Context) Attempt {
	r := Attempt{Host: a.Host, N: a.N, Request: a.Request, Hedge: a.Hedge, Err: context.Cause(ctx), Class: ClassFatal}
	if !a.start.IsZero() {
		r.Duration = time.Since(a.start)
	}
	return r
}

// abandon cancels the attempts still in flight and reports each: as lost
// to a faster attempt, or, when ctx is the caller's ended context, as cut
// short by it (except the newest, which stands for the round). Their
// bodies are closed in the background once Base returns.
func (c *callState) abandon(ctx context.Context, inflight []*attempt, results <-chan result, ended context.Context) {
	for i, a := range inflight {
		a.lose()
		if ended != nil && i == len(inflight)-1 {
			continue
		}
		r := c.cut(a, ctx)
		r.Class = ClassDefault
		r.Err, r.Lost = errLost, true
		if ended != nil {
			r.Err, r.Class, r.Lost = context.Cause(ended), ClassFatal, false
		}
		c.observe(ctx, &r)
	}
	if len(inflight) > 0 {
		go reap(results, len(inflight))
	}
}

// reap waits for the answers of pending cancelled attempts, closes their
// bodies and tells the breaker they do not count.
func reap(results <-chan result, pending int) {
	for range pending {
		r := <-results
		if r.resp != nil {
			closeBody(r.resp.Body)
		}
		if r.a.breakDone != nil {
			r.a.breakDone(errBreakerExcluded)
		}
		r.a.adm.done(time.Now(), signalNone, nil, nil)
		r.a.end()
	}
}
