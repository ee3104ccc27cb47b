package backoff

import (
	"context"
	"time"
)

// ErrDeadline is returned by [Wait] when the wait would end
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
// deadline. It is true when ctx has no deadline. To leave time for the work
// that follows the wait, add that work's expected duration to d.
func Fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}
