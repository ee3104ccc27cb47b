package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"
)

// HedgePolicy configures hedged requests: when an attempt has not answered
// after a delay, another is sent alongside it, and the first acceptable
// answer (one that would not be retried) wins. The others are cancelled and
// their bodies closed. Hedging trades extra load for lower tail latency, so
// it applies only to requests that are safe to send twice (idempotent
// methods or keyed requests, with a replayable body). Every hedge carries
// the same idempotency key and its own body, counts toward MaxAttempts, and
// is admitted by the breaker like a retry.
//
// The delay is fixed (Delay) or learned per host (Adaptive): the host's
// Quantile of first-attempt latency, but never less than twice its median,
// over its last 512 to 1,024 requests. Either way, a host's hedges are
// capped by its hedge budget, however slow it gets: each request that may
// be hedged earns 4 % of a hedge, and the budget holds at most 4, so that
// hedges add at most 5 % to the 400 requests of a 10 s brownout instead of
// doubling them. A hedge on time may not take the budget's last hedge: an
// attempt still unanswered at twice the delay may. Hedges are not charged
// to the retry budget, and a hedge that wins is not refunded.
//
// The zero value sends no hedges. In Hosts and WithPolicy, a zero
// HedgePolicy inherits and a non-zero one replaces the inherited one as a
// whole.
type HedgePolicy struct {
	// Delay is how long an attempt may go unanswered before a hedge is
	// sent. With Adaptive, it is the delay used until the host has
	// MinSamples samples; 0 then means no hedging until then. Without
	// Adaptive, 0 means no hedging. A negative value is invalid.
	Delay time.Duration

	// Adaptive learns the delay from the host's latency: its Quantile of
	// the first attempts of its last 512 to 1,024 requests sent with an
	// adaptive policy, but never less than twice their median, bounded by
	// MinDelay and MaxDelay. The latency is per host and shared by every
	// adaptive policy that reaches it; Quantile, MinSamples, MinDelay and
	// MaxDelay are read per request. false means the fixed Delay.
	Adaptive bool

	// Quantile is the latency quantile after which an adaptive hedge is
	// sent: on a host whose latency is steady, about 1 − Quantile of
	// requests are hedged (fewer when twice the median is the larger).
	// 0 means 0.95; otherwise it must be in (0, 1). Adaptive only.
	Quantile float64

	// MinSamples is how many samples a host needs before its adaptive
	// delay applies. 0 means 100. A negative value is invalid. Adaptive
	// only.
	MinSamples int

	// MinDelay and MaxDelay bound the adaptive delay. 0 means no bound. A
	// negative value is invalid, as is a MinDelay above a MaxDelay.
	// Adaptive only; they do not bound the fallback Delay.
	MinDelay, MaxDelay time.Duration

	// MaxHedges is the most attempts sent alongside the first of a round.
	// 0 means 1. It is bounded by MaxAttempts − 1. A negative value is
	// invalid.
	MaxHedges int

	// Disabled means no hedging, even where the policy would inherit it.
	Disabled bool
}

// Defaults of the adaptive hedge delay.
const (
	DefaultHedgeQuantile   = 0.95
	DefaultHedgeMinSamples = 100
)

// The hedge budget of every host (see hedgeBudget): each hedged request
// earns hedgeRatio of a hedge, the bucket holds hedgeBurst, and a hedge on
// time leaves the last hedgeKeep to attempts still unanswered at twice the
// delay. Hedging after the p95 "limits the additional load to
// approximately 5 %" (Dean and Barroso, The Tail at Scale, 2013); the
// budget makes 5 % a ceiling that holds when every request is slow: over
// the 400 requests of a 10 s brownout at 200 ms and concurrency 8 (issue
// 14's T2), at most 0.04 × 400 + 4 = 20 hedges. See docs/hedging.md.
const (
	hedgeRatio = 0.04
	hedgeBurst = 4
	hedgeKeep  = 1
)

// adaptiveHedge is the compiled adaptive part of a HedgePolicy.
type adaptiveHedge struct {
	q                  float64
	minSamples         int
	minDelay, maxDelay time.Duration
}

// hedging reports whether this call sends hedges.
func (c *callState) hedging() bool {
	return c.delay > 0 && c.hedgeable()
}

// hedgeable reports whether the call may send hedges from now on.
func (c *callState) hedgeable() bool {
	return c.sent < c.p.maxAttempts-1 && c.body.replayable() && (c.key != "" || c.p.replayable(c.req))
}

// startHedging prepares the hedging of a call whose policy hedges, once its
// host's state is loaded: the host's estimator, when the call's first
// attempt is to feed it; the hedge delay; and the hedge budget's credit for
// the request. A fixed-delay policy gives its host state at its first
// hedge: until then the host's budget would be full, as a new one is.
func (c *callState) startHedging() {
	if !c.hedgeable() {
		return
	}
	p := c.p
	c.delay = p.hedgeDelay
	if a := p.adaptive; a != nil {
		c.ensureState()
		c.state.hedgeBudget()
		c.learn = c.state.estimator(a)
		if d, ok := c.learn.delayAt(time.Now(), a.q, a.minSamples); ok {
			if a.minDelay > 0 {
				d = max(d, a.minDelay)
			}
			if a.maxDelay > 0 {
				d = min(d, a.maxDelay)
			}
			c.delay = d
		}
	}
	if c.state != nil {
		if b := c.state.hedges.Load(); b != nil {
			b.request()
		}
	}
}

// learnFrom feeds the host's estimator with attempt a, once settled and
// classified, when a is the call's first attempt and the call learns: an
// answer that is not retried is a sample; an attempt cut short by its
// timeout or the caller's context, a censored one. A transient failure says
// nothing about how long an answer takes.
func (c *callState) learnFrom(ctx context.Context, a *attempt) {
	if c.learn == nil || a.N != 1 {
		return
	}
	switch {
	case a.Response != nil && !a.Class.retryable():
		c.learn.record(a.Duration, a.start.Add(a.Duration))
	case errors.Is(a.Err, ErrAttemptTimeout) || ctx.Err() != nil:
		c.learn.recordCensored(a.Duration, a.start.Add(a.Duration))
	}
}

// censor feeds the host's estimator with attempt a, cut short unanswered,
// when a is the call's first attempt and the call learns.
func (c *callState) censor(a *attempt) {
	if c.learn != nil && a.N == 1 {
		now := time.Now()
		c.learn.recordCensored(now.Sub(a.start), now)
	}
}

// maxBufferedResults bounds the buffer of a round's results.
const maxBufferedResults = 8

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
	// The round sends at most limit attempts in all; written so that a
	// huge MaxHedges cannot overflow (hedging implies sent < maxAttempts-1).
	limit := c.sent + 1 + min(c.p.maxHedges, c.p.maxAttempts-c.sent-1)
	// Every attempt launched is received, here or by reap, so the buffer
	// only spares senders a wait: it is bounded, not sized by MaxAttempts.
	results := make(chan result, min(limit-c.sent, maxBufferedResults))
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
	timer := time.NewTimer(c.delay)
	defer timer.Stop()
	late := false // the hedge was refused on time; the next try is late
	for {
		select {
		case r := <-results:
			a := r.a
			inflight = slices.DeleteFunc(inflight, func(x *attempt) bool { return x == a })
			a.settle(r.resp, r.err, r.fired)
			c.classify(a)
			c.record(ctx, a)
			c.learnFrom(ctx, a)
			if len(inflight) == 0 || !a.Class.retryable() {
				c.abandon(ctx, inflight, results, nil)
				return a, nil
			}
			// Others are still out: this failure is reported and discarded,
			// and the round goes on. Its body is closed, not drained: a
			// drain would hold back the answers of the others.
			c.observe(ctx, &a.Attempt)
			if a.Response != nil {
				closeBody(a.Response.Body)
			}
			a.end()
		case <-timer.C:
			if c.sent >= limit || ctx.Err() != nil {
				continue
			}
			c.ensureState()
			hb := c.state.hedgeBudget()
			if !hb.allow(late) {
				c.state.hedgeRefusals.Add(1)
				if !late {
					// Try once more at twice the delay, with the kept
					// token: an attempt still out then is stuck, not slow.
					late = true
					timer.Reset(c.delay)
				}
				continue // over the hedge budget; the round goes on without a hedge
			}
			late = false
			body, err := c.body.next(c.sent + 1)
			if err != nil {
				hb.refund()
				continue
			}
			h := new(attempt)
			if err := c.prepare(ctx, body, h, true, true); err != nil {
				hb.refund()
				continue // the breaker or an overload control refused the hedge; the round goes on without it
			}
			c.hedges++
			launch(h)
			timer.Reset(c.delay)
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

// ensureState creates the host's state, which a hedge is charged to and
// adaptive hedging learns in.
func (c *callState) ensureState() {
	if c.state == nil && c.p.stateful() {
		c.state = c.newState()
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
		c.censor(a)
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
