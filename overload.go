package httpretry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/internal/hoststate"
	"github.com/seedhq/httpretry/internal/limiter"
	"github.com/seedhq/httpretry/internal/pacer"
	"github.com/seedhq/httpretry/internal/signal"
)

// admission is what an attempt holds from its host's overload controls,
// from its admission until its outcome is known: an outcome owed to the
// throttle, a slot of the limiter, a place among the pacer's attempts in
// flight. The zero value holds nothing.
type admission struct {
	s         *hoststate.State // nil once given back, or when no control took part
	throttled bool             // admitted by s.throttle, which is owed the outcome
	limited   bool             // holds a slot of s.limiter
	paced     bool             // counted among s.pacer's attempts in flight
	probe     bool             // let through the pacer's pause to see whether it still holds
	shared    bool             // took its turn at the fleet's share of the quota
	start     time.Time        // when the attempt was sent, for the limiter's round trip
	patience  time.Duration
}

// admitWaiting runs the admissions that may wait, for attempt a of host
// s: the pacer, which may wait for the announced reset, then the limiter,
// which may wait for a slot. A hedge never waits. On a refusal it returns
// a *refusal; what was taken stays on a.adm for release.
func (c *callState) admitWaiting(ctx context.Context, a *attempt, s *hoststate.State) error {
	a.adm.s = s
	if s.Pacer != nil {
		probe, err := c.pace(ctx, a, s)
		if err != nil {
			return err
		}
		a.adm.paced, a.adm.probe = true, probe
	}
	if s.Limiter == nil {
		return nil
	}
	now := time.Now()
	var err error
	if a.Hedge {
		if !s.Limiter.TryAcquire(now) {
			err = limiter.ErrFull
		}
	} else {
		err = s.Limiter.Acquire(ctx, now)
	}
	switch {
	case errors.Is(err, limiter.ErrFull):
		return &refusal{StopConcurrencyLimit, fmt.Errorf("%w (%s)", ErrConcurrencyLimit, s.Key)}
	case err != nil:
		return &refusal{StopConcurrencyLimit, fmt.Errorf("%w (%s): no slot before the context ended: %w", ErrConcurrencyLimit, s.Key, err)}
	}
	a.adm.limited = true
	return nil
}

// pace waits, when the host announced that its quota is spent, until the
// reset lets the attempt go, or refuses it with ErrRateLimited when the
// reset is further away than MaxRetryAfter or the context's deadline
// allows, or at once under PaceFailFast or for a hedge. The wait is
// jittered upward, up to 10 %, as a Retry-After wait is. It reports
// whether the attempt is the pause's probe; on success the attempt is
// counted among the pacer's in flight.
func (c *callState) pace(ctx context.Context, a *attempt, s *hoststate.State) (probe bool, err error) {
	p, hedge := s.Pacer, a.Hedge
	if !a.cooling.IsZero() {
		p.Hold(time.Now(), a.cooling) // the fleet's cool-down holds this process too
	}
	for {
		now := time.Now()
		limit := c.p.maxRetryAfter
		if hedge || c.p.overload.PaceFailFast {
			limit = 0
		}
		if dl, ok := ctx.Deadline(); ok {
			limit = min(limit, dl.Sub(now)-1) // backoff.Fits: the wait must end before the deadline
		}
		wait, ok, probe, ticket := p.Admit(now, max(limit, 0), turnLimit(ctx, now, limit))
		switch {
		case !ok:
			return false, &refusal{StopRateLimited, fmt.Errorf("%w (%s): it resets in %v", ErrRateLimited, s.Key, wait.Round(time.Millisecond))}
		case wait == 0 || ticket:
			// Admitted, at once or at its turn at the host's rate (the
			// wait is its place in the schedule, not jittered), and at its
			// turn at the fleet's quota; it goes once the wait is over.
			fw, ok := c.fleetTurn(a, now, turnLimit(ctx, now, limit))
			a.adm.shared = ok // this pass's turn, not an earlier one's
			if ok {
				if fw > turnLimit(ctx, now, limit) {
					if ticket {
						p.Refund(now) // the turn at the local rate goes to the next attempt
					}
					p.Done()
					return false, &refusal{StopRateLimited, fmt.Errorf("%w (%s): the fleet's quota gives a turn in %v", ErrRateLimited, s.Key, fw.Round(time.Millisecond))}
				}
				wait = max(wait, fw)
			}
			if wait == 0 {
				return probe, nil
			}
			if err := backoff.Wait(ctx, wait); err != nil {
				p.Done()
				if errors.Is(err, backoff.ErrDeadline) {
					return false, &refusal{StopDeadline, err}
				}
				return false, &refusal{StopContext, err}
			}
			// A cool-down the fleet began while the attempt waited for its
			// turn holds it too: the turn is given up, and it waits for the
			// cool-down (or is refused) as a new attempt would.
			if c.fleetPacing() {
				if a.fleetKey == "" {
					a.fleetKey = c.fleetKey()
				}
				now := time.Now()
				if cooling, _ := c.t.Fleet.Held(a.fleetKey, now); cooling.After(now) {
					p.Done()
					p.Hold(now, cooling)
					continue
				}
			}
			return probe, nil
		}
		wait = max(wait, min(addJitter(wait), limit))
		if err := backoff.Wait(ctx, wait); err != nil {
			if errors.Is(err, backoff.ErrDeadline) { // the clock moved on since the check
				return false, &refusal{StopDeadline, err}
			}
			return false, &refusal{StopContext, err}
		}
	}
}

// fleetTurn takes attempt a's turn, at now and at most within away, at
// the quota its policy declares, when the fleet shares it: how long to
// wait for it (past within: none was taken), ok false when the fleet does
// not share it now.
func (c *callState) fleetTurn(a *attempt, now time.Time, within time.Duration) (time.Duration, bool) {
	o := c.statePolicy().overload
	if c.t.Fleet == nil || o == nil || o.Quota.Limit <= 0 {
		return 0, false
	}
	if a.fleetKey == "" {
		a.fleetKey = c.fleetKey()
	}
	return c.t.Fleet.Take(a.fleetKey, o.Quota, now, within)
}

// turnLimit is the longest an attempt paced at the host's rate waits for
// its turn, at now, within limit: long enough before the context's
// deadline that the attempt can still be answered, a tenth of the time
// left and at least 100 ms, and at most maxTurn. A turn that would come later is refused at
// once: taken, it would be lost to the deadline, and the host's rate with
// it.
func turnLimit(ctx context.Context, now time.Time, limit time.Duration) time.Duration {
	limit = min(limit, maxTurn)
	dl, ok := ctx.Deadline()
	if !ok {
		return max(limit, 0)
	}
	left := dl.Sub(now)
	return max(min(limit, left-max(left/10, 100*time.Millisecond)), 0)
}

// maxTurn bounds the wait for a turn at the host's rate: a queue of turns
// further ahead would hold back what a change of the rate does by as long
// (the rate rose past what the host takes before a throttle could say so),
// and a caller that wants more than the rate gives is better told at once.
const maxTurn = time.Second

// addJitter returns d lengthened at random by up to 10 %, saturating
// rather than overflowing.
func addJitter(d time.Duration) time.Duration {
	j := time.Duration(float64(d) / 10 * rand.Float64())
	if d > maxDuration-j {
		return maxDuration
	}
	return d + j
}

const maxDuration = time.Duration(1<<63 - 1)

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
// with signal sig and response resp (nil if none), read as hints say, and
// gives back what it held. Later calls do nothing.
//
// It returns the end of the cool-down the response started at the pacer,
// zero if none.
func (ad *admission) done(now time.Time, sig signal.Signal, resp *http.Response, hints *pacer.Hints) (spent time.Time) {
	s := ad.s
	if s == nil {
		return time.Time{}
	}
	ad.s = nil
	if ad.throttled {
		s.Throttle.Record(now, sig)
	}
	if ad.limited {
		s.Limiter.Release(ad.start, now, sig, ad.patience)
	}
	if ad.paced {
		if hints != nil {
			spent = s.Pacer.Observe(now, resp, hints, ad.probe, ad.shared)
		}
		s.Pacer.Done()
	}
	return spent
}
