package httpretry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

// admission is what an attempt holds from its host's overload controls,
// from its admission until its outcome is known: a slot of the limiter, a
// place among the pacer's attempts in flight. The zero value holds nothing.
type admission struct {
	s        *hostState // nil once given back, or when no control took part
	limited  bool       // holds a slot of s.limiter
	paced    bool       // counted among s.pacer's attempts in flight
	start    time.Time  // when the attempt was sent, for the limiter's round trip
	patience time.Duration
}

// admit asks the host's overload controls whether the next attempt may be
// sent, in this order: the pacer, which may wait for the announced reset;
// the throttle; the limiter, which may wait for a slot. A hedge never
// waits. On a refusal it returns a *refusal, with what the earlier
// controls gave already given back.
func (c *callState) admit(ctx context.Context, hedge bool) (admission, error) {
	s := c.state
	if s == nil || (s.throttle == nil && s.limiter == nil && s.pacer == nil) {
		return admission{}, nil
	}
	ad := admission{s: s}
	now := time.Now()
	if s.pacer != nil {
		var err error
		if now, err = c.pace(ctx, hedge, now); err != nil {
			return admission{}, err
		}
		ad.paced = true
	}
	if !s.throttle.admit(now) {
		ad.done(now, signalNone, nil, nil)
		return admission{}, &refusal{StopThrottled, fmt.Errorf("%w (%s)", ErrThrottled, s.key)}
	}
	if s.limiter != nil {
		var err error
		if hedge {
			if !s.limiter.tryAcquire(now) {
				err = ErrConcurrencyLimit
			}
		} else {
			err = s.limiter.acquire(ctx, now)
		}
		switch {
		case errors.Is(err, ErrConcurrencyLimit):
			err = fmt.Errorf("%w (%s)", ErrConcurrencyLimit, s.key)
		case err != nil:
			err = fmt.Errorf("%w (%s): no slot before the context ended: %w", ErrConcurrencyLimit, s.key, err)
		}
		if err != nil {
			ad.done(time.Now(), signalNone, nil, nil)
			return admission{}, &refusal{StopConcurrencyLimit, err}
		}
		ad.limited = true
	}
	return ad, nil
}

// pace waits, when the host announced that its quota is spent, until the
// reset lets the attempt go, or refuses it with ErrRateLimited when the
// reset is further away than MaxRetryAfter or the context's deadline
// allows, or at once under PaceFailFast or for a hedge. The wait is
// jittered upward, up to 10 %, as a Retry-After wait is. On success the
// attempt is counted among the pacer's in flight. now is the time, which
// it returns moved past any wait.
func (c *callState) pace(ctx context.Context, hedge bool, now time.Time) (time.Time, error) {
	p := c.state.pacer
	for {
		limit := c.p.maxRetryAfter
		if hedge || c.p.overload.PaceFailFast {
			limit = 0
		}
		if dl, ok := ctx.Deadline(); ok {
			limit = min(limit, dl.Sub(now)-1) // backoff.Fits: the wait must end before the deadline
		}
		wait, ok := p.admit(now, max(limit, 0))
		switch {
		case wait == 0:
			return now, nil
		case !ok:
			return now, &refusal{StopRateLimited, fmt.Errorf("%w (%s): it resets in %v", ErrRateLimited, c.state.key, wait.Round(time.Millisecond))}
		}
		wait = max(wait, min(wait+time.Duration(float64(wait)/10*rand.Float64()), limit))
		if err := backoff.Wait(ctx, wait); err != nil {
			if errors.Is(err, backoff.ErrDeadline) { // the clock moved on since the check
				return now, &refusal{StopDeadline, err}
			}
			return now, &refusal{StopContext, err}
		}
		now = time.Now()
	}
}

// sent notes that the attempt admitted by ad is sent now, with at most
// timeout (0: none) and the context's deadline to answer.
func (ad *admission) sent(ctx context.Context, now time.Time, timeout time.Duration) {
	if !ad.limited {
		return
	}
	ad.start, ad.patience = now, timeout
	if dl, ok := ctx.Deadline(); ok && (timeout == 0 || dl.Sub(now) < timeout) {
		ad.patience = max(dl.Sub(now), time.Nanosecond)
	}
}

// done tells the controls that admitted the attempt how it ended, at now
// with signal s and response resp (nil if none), read as hints say, and
// gives back what it held. Later calls do nothing.
func (ad *admission) done(now time.Time, sig signal, resp *http.Response, hints *HintPolicy) {
	s := ad.s
	if s == nil {
		return
	}
	ad.s = nil
	s.throttle.record(now, sig)
	if ad.limited {
		s.limiter.release(ad.start, now, sig, ad.patience)
	}
	if ad.paced {
		if resp != nil && hints != nil {
			s.pacer.observe(now, resp, hints)
		}
		s.pacer.done()
	}
}
