package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ErrDeadline is returned by [Wait] and [Retry] when the next wait would end
// after the context's deadline, so it is not started. errors.Is reports it
// as [context.DeadlineExceeded] too.
var ErrDeadline error = deadlineError{}

type deadlineError struct{}

func (deadlineError) Error() string { return "backoff: next wait would end after the context deadline" }

func (deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// Wait blocks for d or until ctx is done, whichever comes first. It returns
// nil after a full wait and context.Cause(ctx) when ctx ended first. When ctx
// has a deadline that comes before the wait would end, Wait returns
// [ErrDeadline] at once without waiting. The timer is stopped on every path.
func Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if !Fits(ctx, d) {
		return ErrDeadline
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Fits reports whether a wait of d started now would end before ctx's
// deadline, leaving time for the work that follows it. It is true when ctx
// has no deadline.
func Fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// Permanent wraps err so that [Retry] returns at once instead of retrying.
// errors.Is and errors.As see through the wrapper. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// IsPermanent reports whether err was marked with [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Options configure [Retry]. The zero value retries up to 4 attempts with
// the [Default] strategy.
type Options struct {
	// Strategy computes each wait. Nil means Default().
	Strategy Strategy

	// MaxAttempts counts attempts including the first. 0 means 4; a negative
	// value means no limit other than the context.
	MaxAttempts int

	// Notify, if non-nil, is called before each wait with the error that
	// caused the retry, the number of the retry about to be made (1 for the
	// first) and the delay. It runs on the calling goroutine.
	Notify func(err error, retry int, delay time.Duration)

	// Rand is the source of randomness passed to Strategy. Nil means the
	// shared generator of math/rand/v2. A *rand.Rand is not safe for
	// concurrent use: give each call its own.
	Rand *rand.Rand
}

// DefaultMaxAttempts is the number of attempts [Retry] makes when
// Options.MaxAttempts is 0.
const DefaultMaxAttempts = 4

// Error is returned by [Retry] when op did not succeed. It keeps the number
// of attempts made and op's last error; when the context ended the loop, the
// context's cause is kept too. errors.Is and errors.As reach both.
type Error struct {
	Attempts int   // attempts made, including the first
	Err      error // op's last error; nil if op never ran
	Cause    error // why retrying stopped early: the context's cause or ErrDeadline; nil otherwise
}

func (e *Error) Error() string {
	switch {
	case e.Cause != nil && e.Err != nil:
		return fmt.Sprintf("backoff: stopped after %d attempts: %v (last error: %v)", e.Attempts, e.Cause, e.Err)
	case e.Cause != nil:
		return fmt.Sprintf("backoff: stopped after %d attempts: %v", e.Attempts, e.Cause)
	}
	return fmt.Sprintf("backoff: giving up after %d attempts: %v", e.Attempts, e.Err)
}

// Unwrap returns the last error and the cause, whichever are set.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	for _, err := range []error{e.Err, e.Cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Retry calls op until it returns a nil error, an error marked [Permanent],
// the attempts run out, or ctx ends. op receives ctx.
//
// On success Retry returns op's value and a nil error. Otherwise it returns
// op's last value with an *[Error]; a Permanent error is returned inside it
// unwrapped of its marker. The context is checked before every attempt and
// every wait; a wait that would end after ctx's deadline is not started.
func Retry[T any](ctx context.Context, opts Options, op func(context.Context) (T, error)) (T, error) {
	s := opts.Strategy
	if s == nil {
		s = Default()
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = DefaultMaxAttempts
	}
	var (
		v    T
		err  error
		prev time.Duration
	)
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return v, &Error{Attempts: attempt - 1, Err: err, Cause: context.Cause(ctx)}
		}
		v, err = op(ctx)
		if err == nil {
			return v, nil
		}
		var p *permanentError
		if errors.As(err, &p) {
			return v, &Error{Attempts: attempt, Err: p.err}
		}
		if maxAttempts > 0 && attempt >= maxAttempts {
			return v, &Error{Attempts: attempt, Err: err}
		}
		d := s.Delay(attempt, prev, opts.Rand)
		prev = d
		if !Fits(ctx, d) {
			return v, &Error{Attempts: attempt, Err: err, Cause: ErrDeadline}
		}
		if ctx.Err() != nil {
			return v, &Error{Attempts: attempt, Err: err, Cause: context.Cause(ctx)}
		}
		if opts.Notify != nil {
			opts.Notify(err, attempt, d)
		}
		if werr := Wait(ctx, d); werr != nil {
			return v, &Error{Attempts: attempt, Err: err, Cause: werr}
		}
	}
}
