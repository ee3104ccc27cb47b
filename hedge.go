package httpretry

import (
	"context"
	"errors"
	"io"
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
type HedgePolicy struct {
	// Delay is how long an attempt may go unanswered before a hedge is
	// sent. 0 disables hedging.
	Delay time.Duration

	// MaxHedges is the most attempts sent alongside the first of a round.
	// 0 means 1.
	MaxHedges int
}

// ErrHedgeLost is the error reported to OnAttempt and the Logger for an
// attempt cancelled because a hedge answered first.
var ErrHedgeLost = errors.New("httpretry: cancelled, another hedge answered first")

// hedging reports whether this call sends hedges.
func (c *call) hedging() bool {
	return c.p.hedgeDelay > 0 && c.body.replayable() && (c.key != "" || c.p.replayable(c.req))
}

// sendHedged runs one round of hedged attempts, starting with attempt n+1
// and body rc. It returns the round's outcome and the number of attempts
// launched so far. The outcome is the first acceptable answer, or, when
// every attempt of the round failed in a way worth retrying, the last
// failure. Cancelled attempts are reaped in the background, where their
// bodies are closed; they end as soon as Base honours the cancellation.
func (c *call) sendHedged(ctx context.Context, n int, rc io.ReadCloser) (outcome, int) {
	limit := min(n+1+c.p.maxHedges, c.p.maxAttempts)
	results := make(chan outcome, limit-n)
	var inflight []outcome // launched, not yet answered
	base, p := c.t.base, c.p
	launch := func(o outcome) {
		inflight = append(inflight, o)
		go func() {
			o.resp, o.err = base.RoundTrip(o.areq)
			finish(ctx, p, &o)
			results <- o
		}()
	}
	n++
	first, ok := c.prepare(ctx, n, rc, true)
	if !ok {
		return first, n // the breaker refused
	}
	launch(first)
	timer := time.NewTimer(c.p.hedgeDelay)
	defer timer.Stop()
	for {
		select {
		case o := <-results:
			inflight = removeAttempt(inflight, o.n)
			if len(inflight) == 0 || !o.class.retryable() {
				c.abandon(ctx, inflight, results, nil)
				return o, n
			}
			// Others are still out: this failure is discarded, the round goes on.
			discard(o.resp)
			o.done.cancel()
		case <-timer.C:
			if n >= limit || (c.budget != nil && !c.budget.AllowRetry(time.Now(), false)) {
				continue
			}
			body, err := c.body.next(n + 1)
			if err != nil {
				continue
			}
			o, ok := c.prepare(ctx, n+1, body, true)
			if !ok {
				continue // the breaker refused the hedge; the round goes on without it
			}
			n++
			launch(o)
			timer.Reset(c.p.hedgeDelay)
		case <-ctx.Done():
			// The newest attempt stands for the round in RoundTrip's own
			// report; the others are reported here.
			last := inflight[len(inflight)-1]
			c.abandon(ctx, inflight[:len(inflight)-1], results, context.Cause(ctx))
			last.done.lose()
			go reap(results, 1)
			return outcome{n: last.n, areq: last.areq, err: context.Cause(ctx), class: ClassFatal}, n
		}
	}
}

// abandon cancels the attempts still in flight, reports each, and closes
// their bodies in the background once Base returns. A nil cause means a
// hedge answered first; otherwise the caller's context ended with cause.
func (c *call) abandon(ctx context.Context, inflight []outcome, results <-chan outcome, cause error) {
	for _, o := range inflight {
		o.done.lose()
		a := Attempt{Request: o.areq, N: o.n, Err: ErrHedgeLost, Stop: StopHedgeLost}
		if cause != nil {
			a.Err, a.Class, a.Stop = cause, ClassFatal, StopContext
		}
		c.t.observe(ctx, &a, c.budget)
	}
	if len(inflight) > 0 {
		go reap(results, len(inflight))
	}
}

// reap waits for the answers of pending cancelled attempts and closes their
// bodies.
func reap(results <-chan outcome, pending int) {
	for range pending {
		o := <-results
		if o.resp != nil {
			closeReader(o.resp.Body)
		}
	}
}

func removeAttempt(list []outcome, n int) []outcome {
	for i, o := range list {
		if o.n == n {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}
