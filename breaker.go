package httpretry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerPolicy configures a circuit breaker per host. While a host's
// breaker is open, RoundTrip fails fast with an error that errors.Is
// ErrCircuitOpen: no attempt, no wait, no budget charge. It is consulted
// before every attempt, hedges included.
//
// The zero value means no breaker. A breaker needs a trip rule: it opens
// after ConsecutiveFailures failures in a row, or when failures reach
// FailureRatio of at least MinRequests attempts in the last Window,
// whichever holds first. After OpenFor it lets HalfOpenAttempts trial
// attempts through: that many successes close it, a failure opens it again.
//
// What counts: transient and not-processed failures, and fatal errors
// without a response (a certificate error), are failures; any response the
// server meant to send, 4xx included, is a success; the caller's
// cancellation and an attempt that lost to a hedge are not counted.
type BreakerPolicy struct {
	// ConsecutiveFailures opens the breaker after this many failed
	// attempts in a row. 0 means this rule is off.
	ConsecutiveFailures int

	// FailureRatio opens the breaker when failed attempts reach this share
	// (0 to 1) of the attempts in Window, once Window holds MinRequests. 0
	// means this rule is off.
	FailureRatio float64

	// MinRequests is how many attempts Window must hold before
	// FailureRatio applies. 0 means 20.
	MinRequests int

	// Window is how far back attempts are counted while the breaker is
	// closed, in ten sliding steps. 0 means 10 s.
	Window time.Duration

	// OpenFor is how long the breaker stays open before it lets trial
	// attempts through. 0 means 5 s.
	OpenFor time.Duration

	// HalfOpenAttempts is how many trial attempts a half-open breaker lets
	// through, and how many must succeed in a row to close it. 0 means 1.
	HalfOpenAttempts int

	// Disabled means no breaker, even where the policy would inherit one.
	Disabled bool
}

// Defaults of BreakerPolicy, from Hystrix's (20 requests in a 10 s rolling
// window) and Polly's (5 s break) circuit breakers.
const (
	defaultBreakerMinRequests = 20
	defaultBreakerWindow      = 10 * time.Second
	defaultBreakerOpenFor     = 5 * time.Second
)

func (b BreakerPolicy) enabled() bool {
	return !b.Disabled && (b.ConsecutiveFailures > 0 || b.FailureRatio > 0)
}

// BreakerState is the state of a circuit breaker.
type BreakerState int

const (
	BreakerClosed   BreakerState = iota // attempts pass
	BreakerHalfOpen                     // trial attempts pass
	BreakerOpen                         // attempts fail fast with ErrCircuitOpen
)

var breakerStateNames = [...]string{"closed", "half-open", "open"}

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	if s >= 0 && int(s) < len(breakerStateNames) {
		return breakerStateNames[s]
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// breaker is the circuit breaker of one host.
type breaker struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// Outcomes reported to gobreaker. They never leave this package.
var (
	errBreakerFailure  = errors.New("httpretry: attempt failed")
	errBreakerExcluded = errors.New("httpretry: attempt not counted")
)

func newBreaker(host string, p *BreakerPolicy) *breaker {
	minRequests := uint32(min(cmp.Or(p.MinRequests, defaultBreakerMinRequests), 1<<31))
	window := cmp.Or(p.Window, defaultBreakerWindow)
	st := gobreaker.Settings{
		Name:         host,
		MaxRequests:  uint32(min(cmp.Or(p.HalfOpenAttempts, 1), 1<<31)),
		Interval:     window,
		BucketPeriod: max(window/10, time.Nanosecond),
		Timeout:      cmp.Or(p.OpenFor, defaultBreakerOpenFor),
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if p.ConsecutiveFailures > 0 && int64(c.ConsecutiveFailures) >= int64(p.ConsecutiveFailures) {
				return true
			}
			counted := c.TotalSuccesses + c.TotalFailures
			return p.FailureRatio > 0 && counted >= minRequests &&
				float64(c.TotalFailures) >= p.FailureRatio*float64(counted)
		},
		IsExcluded: func(err error) bool { return err == errBreakerExcluded },
	}
	return &breaker{gobreaker.NewTwoStepCircuitBreaker[struct{}](st)}
}

// admit asks the breaker whether an attempt may be sent. It returns the
// callback that reports the attempt's outcome, or an error wrapping
// ErrCircuitOpen when the breaker refuses. A nil breaker admits everything.
func (b *breaker) admit() (func(error), error) {
	if b == nil {
		return nil, nil
	}
	done, err := b.cb.Allow()
	switch {
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return nil, fmt.Errorf("%w for %s (half-open, trial attempts in flight)", ErrCircuitOpen, b.cb.Name())
	case err != nil:
		return nil, fmt.Errorf("%w for %s", ErrCircuitOpen, b.cb.Name())
	}
	return done, nil
}

// open reports whether the breaker would refuse an attempt now.
func (b *breaker) open() bool {
	return b != nil && b.cb.State() == gobreaker.StateOpen
}

// state returns the breaker's state and counts in the current window.
func (b *breaker) state() (BreakerState, gobreaker.Counts) {
	return BreakerState(b.cb.State()), b.cb.Counts()
}

// atRest reports whether the breaker behaves as a new one would: closed,
// with no failure in its window.
func (b *breaker) atRest() bool {
	s, c := b.state()
	return s == BreakerClosed && c.TotalFailures == 0
}

// breakerOutcome maps a classified attempt to what the breaker counts:
// transient and not-processed failures, and fatal errors without a response
// (a certificate the host should not present), are failures; any response
// the server meant to send, 4xx included, is a success; the caller's own
// cancellation, a lost hedge and a breaker refusal further down are not
// counted.
func breakerOutcome(ctx context.Context, a *Attempt) error {
	switch {
	case ctx.Err() != nil || a.Lost || isBreakerOpen(a.Err):
		return errBreakerExcluded
	case a.Class.retryable() || (a.Err != nil && a.Class == ClassFatal):
		return errBreakerFailure
	}
	return nil
}

// isBreakerOpen reports whether err is a refusal by a circuit breaker: ours,
// or a gobreaker used by a layer under the Transport.
func isBreakerOpen(err error) bool {
	return errors.Is(err, ErrCircuitOpen) || errors.Is(err, gobreaker.ErrOpenState) ||
		errors.Is(err, gobreaker.ErrTooManyRequests)
}
