package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/seedhq/httpretry/internal/replay"
)

// hedging reports whether this call sends hedges.
func (c *callState) hedging() bool {
	return c.delay > 0 && c.hedgeable()
}

// hedgeable reports whether the call may send hedges from now on.
func (c *callState) hedgeable() bool {
	return c.sent < c.p.maxAttempts-1 && c.body.Replayable() && (c.Key != "" || c.p.replayable(c.req))
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
		if c.state == nil {
			return // past the bound on hosts with state: no estimate to hedge by
		}
		c.state.HedgeBudget()
		c.learn = c.state.Estimator(a.q, a.minSamples)
		if d, ok := c.learn.DelayAt(time.Now(), a.q, a.minSamples); ok {
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
		if b := c.state.Hedges(); b != nil {
			b.Request()
		}
	}
}

// learnFrom feeds the host's estimator with attempt a, once settled and
// classified, when a is the call's first attempt and the call learns: an
// answer that is not retried is a sample; an attempt cut short by its
// timeout or the caller's context, a censored one. A transient failure says
// nothing about how long an answer takes.
func (c *callState) learnFrom(ctx context.Context, a *attempt) {
	if c.learn == nil || a.N != 1 || a.plan.ep != 0 {
		return // the estimator is the request's host's
	}
	switch {
	case a.Response != nil && !a.Class.retryable():
		c.learn.Record(a.Duration, a.start.Add(a.Duration))
	case errors.Is(a.Err, ErrAttemptTimeout) || ctx.Err() != nil:
		c.learn.RecordCensored(a.Duration, a.start.Add(a.Duration))
	}
}

// censor feeds the host's estimator with attempt a, cut short unanswered,
// when a is the call's first attempt and the call learns.
func (c *callState) censor(a *attempt) {
	if c.learn != nil && a.N == 1 && a.plan.ep == 0 {
		now := time.Now()
		c.learn.RecordCensored(now.Sub(a.start), now)
	}
}

// maxBufferedResults bounds the buffer of a round's results.
const maxBufferedResults = 8

// result is what Base returned for a hedged attempt, or how it panicked.
type result struct {
	a        *attempt
	resp     *http.Response
	err      error
	fired    bool // the attempt's timeout had fired when Base returned
	panicked bool // Base panicked (p) or called runtime.Goexit (p nil)
	p        any
}

// round is a hedged round in flight: its attempts run Base on goroutines
// of their own and report here.
type round struct {
	t        *Transport
	results  chan result
	inflight []*attempt // launched, not yet answered
}

// launch sends a, which has passed the pipeline's admission, on a
// goroutine of its own. A panic there is caught and reported as a result,
// to be raised again on the caller's goroutine.
func (r *round) launch(a *attempt) {
	r.inflight = append(r.inflight, a)
	t, results := r.t, r.results
	go func() {
		returned := false
		defer func() {
			if !returned {
				results <- result{a: a, panicked: true, p: recover()}
			}
		}()
		resp, err, fired := a.send(t)
		returned = true
		results <- result{a, resp, err, fired, false, nil}
	}()
}

// answered removes a from the attempts in flight.
func (r *round) answered(a *attempt) {
	r.inflight = slices.DeleteFunc(r.inflight, func(x *attempt) bool { return x == a })
}

// abandon cancels the attempts of call c still in flight and reaps them in
// the background, where each is released once Base returns. It runs on
// every path out of the round, panics included.
func (r *round) abandon(c *callState) {
	for _, a := range r.inflight {
		a.lose()
		c.censor(a)
	}
	if len(r.inflight) > 0 {
		go reap(r.results, len(r.inflight), c.abandoned())
	}
	r.inflight = nil
}

// sendHedged runs one round of hedged attempts, starting with body rc (nil:
// the replay's next). It returns the attempt that stands for the round: the
// first acceptable answer, or, when every attempt of the round failed in a
// way worth retrying, the last failure; the others are reported here.
// Cancelled attempts are reaped in the background, where their bodies are
// closed; they end as soon as Base honours the cancellation. A panic in Base
// on any of the round's goroutines is raised again here, once the others
// are cancelled.
func (c *callState) sendHedged(ctx context.Context, rc io.ReadCloser) (*attempt, error) {
	// The round sends at most limit attempts in all; written so that a
	// huge MaxHedges cannot overflow (hedging implies sent < maxAttempts-1).
	limit := c.sent + 1 + min(c.p.maxHedges, c.p.maxAttempts-c.sent-1)
	// Every attempt launched is received, here or by reap, so the buffer
	// only spares senders a wait: it is bounded, not sized by MaxAttempts.
	r := &round{t: c.t, results: make(chan result, min(limit-c.sent, maxBufferedResults))}
	defer r.abandon(c)
	first := new(attempt) // shared with the goroutine that sends it
	if err := c.beginHedged(ctx, r, first, rc, c.planAttempt(c.nextKind(), true)); err != nil {
		return nil, err
	}
	timer := time.NewTimer(c.delay)
	defer timer.Stop()
	var holding *attempt // an answer in hand, given up if a hook panics before it is passed on or closed
	defer func() {
		if holding != nil {
			holding.abort()
		}
	}()
	late := false // the hedge was refused on time; the next try is late
	for {
		select {
		case res := <-r.results:
			a := res.a
			r.answered(a)
			if res.panicked {
				a.release()
				r.abandon(c)
				if res.p == nil {
					runtime.Goexit()
				}
				panic(res.p)
			}
			c.settleHedged(ctx, a, res) // a panic of Classify's closes the body itself
			holding = a
			if len(r.inflight) == 0 || !a.Class.retryable() {
				c.reportLost(r, ctx, nil)
				holding = nil
				return a, nil
			}
			// Others are still out: this failure is reported and discarded,
			// and the round goes on. Its body is closed, not drained: a
			// drain would hold back the answers of the others.
			c.observe(ctx, &a.Attempt)
			holding = nil
			if a.Response != nil {
				closeBody(a.Response.Body)
			}
			a.end()
		case <-timer.C:
			if c.sent >= limit || ctx.Err() != nil || !c.body.Hedgeable() {
				continue
			}
			c.ensureState()
			if c.state == nil {
				continue // past the bound on hosts with state: no budget to charge
			}
			hb := c.state.HedgeBudget()
			if !hb.Allow(late) {
				c.state.HedgeRefusals.Add(1)
				if !late {
					// Try once more at twice the delay, with the kept
					// token: an attempt still out then is stuck, not slow.
					late = true
					timer.Reset(c.delay)
				}
				continue // over the hedge budget; the round goes on without a hedge
			}
			late = false
			body := c.req.Body
			if c.body != nil {
				var err error
				if body, err = c.body.Next(ctx, true); err != nil {
					hb.Refund()
					if errors.Is(err, replay.ErrBusy) {
						timer.Reset(c.delay) // Base is inside a Read of the caller's stream: try again later
					}
					continue
				}
			}
			if err := c.beginHedged(ctx, r, new(attempt), body, c.planAttempt(hedgeAttempt, true)); err != nil {
				hb.Refund()
				continue // the breaker or an overload control refused the hedge; the round goes on without it
			}
			c.hedges++
			timer.Reset(c.delay)
		case <-ctx.Done():
			// The newest attempt stands for the round in RoundTrip's own
			// report; the others are reported here.
			last := r.inflight[len(r.inflight)-1]
			stand := &attempt{Attempt: c.cut(last, ctx)}
			c.reportLost(r, ctx, ctx)
			c.lastErr = stand.Err
			return stand, nil
		}
	}
}

// beginHedged runs the pipeline's admission for a, an attempt of round r
// planned by pl with body rc, and launches it. On a refusal a is released
// and the *refusal returned.
func (c *callState) beginHedged(ctx context.Context, r *round, a *attempt, rc io.ReadCloser, pl plan) (err error) {
	launched := false
	defer func() {
		if !launched {
			a.release()
		}
	}()
	if err := c.begin(ctx, a, pl, rc, r.inflight); err != nil {
		return err
	}
	r.launch(a)
	launched = true
	return nil
}

// settleHedged settles a, an attempt of a hedged round, releasing it
// whatever happens, a panic of Classify included.
func (c *callState) settleHedged(ctx context.Context, a *attempt, res result) {
	defer a.release()
	if c.moving() {
		c.moveTo(a.plan.ep) // its outcome is its endpoint's
	}
	c.settle(ctx, a, res.resp, res.err, res.fired)
}

// cut describes attempt a, still in flight, as ended by ctx.
func (c *callState) cut(a *attempt, ctx context.Context) Attempt {
	r := Attempt{Host: a.Host, N: a.N, Request: a.Request, Hedge: a.Hedge, Err: context.Cause(ctx), Class: ClassFatal}
	if !a.start.IsZero() {
		r.Duration = time.Since(a.start)
	}
	return r
}

// reportLost reports each attempt still in flight as it is abandoned: as
// lost to a faster attempt, or, when ended is the caller's ended context,
// as cut short by it (except the newest, which stands for the round).
func (c *callState) reportLost(r *round, ctx context.Context, ended context.Context) {
	for i, a := range r.inflight {
		if ended != nil && i == len(r.inflight)-1 {
			continue
		}
		rep := c.cut(a, ctx)
		rep.Class = ClassDefault
		rep.Err, rep.Lost = errLost, true
		if ended != nil {
			rep.Err, rep.Class, rep.Lost = context.Cause(ended), ClassFatal, false
		}
		c.observe(ctx, &rep)
	}
}

// reap waits for the answers of pending cancelled attempts and releases
// each: its body closed, its admission given back, its breaker trial not
// counted. A panic of Base on an abandoned attempt's goroutine, or of its
// response body's Close here, has no caller left to reach: it is logged,
// with its value, at Error.
func reap(results <-chan result, pending int, logPanic func(any)) {
	for range pending {
		res := <-results
		a := res.a
		a.Response = res.resp
		if res.panicked && logPanic != nil {
			logPanic(res.p)
		}
		releaseAbandoned(a, logPanic)
	}
}

// releaseAbandoned releases a, an attempt whose call has returned: a
// panic of Base's (a response body's Close) has no caller left to reach,
// and is logged.
func releaseAbandoned(a *attempt, logPanic func(any)) {
	defer func() {
		if p := recover(); p != nil && logPanic != nil {
			logPanic(p)
		}
	}()
	a.release()
}
