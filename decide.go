package httpretry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/internal/headers"
)

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
	case !c.body.Replayable() || (a.Class == ClassTransient && !p.replayable(a.Request)):
		a.Stop = StopNotReplayable
		return
	case c.sent >= p.maxAttempts:
		a.Stop = StopAttempts
		return
	case c.state != nil && c.state.Breaker.IsOpen() && (!c.moving() || c.retryTarget() < 0):
		a.Stop = StopBreaker // the next attempt would be refused: keep this answer
		c.state.BreakerRefusals.Add(1)
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
		if w := addJitter(sd); w >= d {
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
	if d > maxDuration-a.Duration {
		d = maxDuration
	} else {
		d += a.Duration
	}
	return backoff.Fits(ctx, d)
}

// reserve takes the cost of the next retry from the budget, if the host
// has one: with failover, the budget of the endpoint the retry is expected
// to go to (retryTarget), whose load it adds to.
func (c *callState) reserve(timeout bool) bool {
	s := c.state
	if c.moving() {
		if i := c.retryTarget(); i >= 0 && i != c.fo.cur {
			if c.stateOf(i) == nil {
				// The budget that pays is the target's: give it state,
				// as a host gets at its first failure.
				cur := c.fo.cur
				c.moveTo(i)
				c.ensureState()
				c.moveTo(cur)
			}
			s = c.stateOf(i)
		}
	}
	if c.fo != nil {
		c.fo.reservedIn = s
	}
	if s == nil || s.Budget == nil {
		return true
	}
	if !s.Budget.AllowRetry(timeout) {
		s.BudgetRefusals.Add(1)
		return false
	}
	c.reserved, c.reservedTO, c.timeoutRetry = true, timeout, timeout
	return true
}

// unreserve gives back the cost of a retry that will not be sent.
func (c *callState) unreserve() {
	if c.reserved {
		c.reserved = false
		s := c.state
		if c.fo != nil {
			s = c.fo.reservedIn
		}
		s.Budget.Refund(c.reservedTO)
	}
}

// serverDelay returns the wait the response asks for and where it comes
// from, following the precedence documented on HintPolicy.
func (h *HintPolicy) serverDelay(resp *http.Response, now time.Time) (time.Duration, DelaySource, bool) {
	if resp == nil {
		return 0, DelayNone, false
	}
	if d, ok := headers.RetryAfter(resp, now); ok {
		return d, DelayRetryAfter, true
	}
	if !h.IgnoreRateLimit {
		if vs := resp.Header[headers.RateLimitField]; len(vs) > 0 {
			if d, ok := headers.RateLimit(strings.Join(vs, ",")); ok {
				return d, DelayRateLimit, true
			}
		}
	}
	if h.ResetHeader != "" {
		if vs := resp.Header.Values(h.ResetHeader); len(vs) == 1 {
			if d, ok := headers.Reset(vs[0], now); ok {
				return d, DelayRateLimit, true
			}
		}
	}
	return 0, DelayNone, false
}
