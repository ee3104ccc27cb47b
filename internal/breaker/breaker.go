// Package breaker is the circuit breaker of one host: gobreaker's two-step
// breaker, with the trip rules httpretry's BreakerPolicy describes.
package breaker

import (
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Config holds the trip rules and timings of a breaker. The caller
// resolves defaults; values are taken as they are.
type Config struct {
	ConsecutiveFailures int     // opens after this many failures in a row; 0: rule off
	FailureRatio        float64 // opens when failures reach this share of MinRequests or more in Window; 0: rule off
	MinRequests         int
	Window              time.Duration // closed-state counts cover this much, in ten sliding steps
	OpenFor             time.Duration
	HalfOpenAttempts    int
}

// Outcome is what an attempt the breaker admitted counts as.
type Outcome int

const (
	Success  Outcome = iota // the host answered as it meant to
	Failure                 // the attempt says the host is failing
	Excluded                // the attempt says nothing about the host
)

// Refusals of Allow.
var (
	ErrOpen   = errors.New("open")
	ErrTrials = errors.New("half-open, trial attempts in flight")
)

// State is a breaker's state: gobreaker's, closed 0, half-open 1, open 2.
type State int

const (
	Closed State = iota
	HalfOpen
	Open
)

// Counts are what a breaker counts in its current window.
type Counts struct {
	Successes, Failures, ConsecutiveFailures uint32
}

// Breaker is the circuit breaker of one host. A nil *Breaker admits
// everything. It is safe for concurrent use.
type Breaker struct {
	cb      *gobreaker.TwoStepCircuitBreaker[struct{}]
	openFor time.Duration
}

// errors reported to gobreaker; they never leave this package.
var (
	errFailure  = errors.New("attempt failed")
	errExcluded = errors.New("attempt not counted")
)

// New returns a closed breaker named name.
func New(name string, c Config) *Breaker {
	minRequests := uint32(min(int64(c.MinRequests), 1<<31))
	st := gobreaker.Settings{
		Name:         name,
		MaxRequests:  uint32(min(int64(max(c.HalfOpenAttempts, 1)), 1<<31)),
		Interval:     c.Window,
		BucketPeriod: max(c.Window/10, time.Nanosecond),
		Timeout:      c.OpenFor,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			if c.ConsecutiveFailures > 0 && int64(n.ConsecutiveFailures) >= int64(c.ConsecutiveFailures) {
				return true
			}
			counted := n.TotalSuccesses + n.TotalFailures
			return c.FailureRatio > 0 && counted >= minRequests &&
				float64(n.TotalFailures) >= c.FailureRatio*float64(counted)
		},
		IsExcluded: func(err error) bool { return err == errExcluded },
	}
	return &Breaker{gobreaker.NewTwoStepCircuitBreaker[struct{}](st), c.OpenFor}
}

// Allow asks whether an attempt may be sent: it returns the function that
// reports the attempt's outcome, exactly once, or ErrOpen or ErrTrials. A
// nil breaker admits everything and returns a nil function.
func (b *Breaker) Allow() (func(Outcome), error) {
	if b == nil {
		return nil, nil
	}
	done, err := b.cb.Allow()
	switch {
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return nil, ErrTrials
	case err != nil:
		return nil, ErrOpen
	}
	return func(o Outcome) {
		switch o {
		case Success:
			done(nil)
		case Failure:
			done(errFailure)
		default:
			done(errExcluded)
		}
	}, nil
}

// IsOpen reports whether the breaker would refuse an attempt now, without
// taking a trial.
func (b *Breaker) IsOpen() bool { return b != nil && b.cb.State() == gobreaker.StateOpen }

// HalfOpen reports whether the breaker is half-open: Allow admits its
// trial attempts only. False for a nil breaker.
func (b *Breaker) HalfOpen() bool { return b != nil && b.cb.State() == gobreaker.StateHalfOpen }

// OpenFor is how long the breaker stays open once it opens; 0 for a nil
// breaker.
func (b *Breaker) OpenFor() time.Duration {
	if b == nil {
		return 0
	}
	return b.openFor
}

// State returns the breaker's state and its counts in the current window.
func (b *Breaker) State() (State, Counts) {
	c := b.cb.Counts()
	return State(b.cb.State()), Counts{c.TotalSuccesses, c.TotalFailures, c.ConsecutiveFailures}
}

// AtRest reports whether the breaker behaves as a new one would: closed,
// with no failure in its window. A nil breaker is at rest.
func (b *Breaker) AtRest() bool {
	if b == nil {
		return true
	}
	s, c := b.State()
	return s == Closed && c.Failures == 0
}

// Name is the breaker's name.
func (b *Breaker) Name() string { return b.cb.Name() }
