package httpretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. A *RetryError wraps them; test with errors.Is.
var (
	// ErrInvalidRequest reports a request that cannot be sent at all: a nil
	// URL or header, no host, a malformed method or header, and, with the
	// Transport's own Base, a scheme other than http and https (a custom
	// Base may speak any). No attempt is made and the request body is
	// closed.
	ErrInvalidRequest = errors.New("httpretry: invalid request")

	// ErrInvalidPolicy reports a Policy with nonsense values, a Hosts key
	// that is not a valid pattern, or a per-request override that breaks
	// either rule. Every request it applies to fails with it until the
	// configuration is fixed; (*Transport).Validate reports all of them at
	// once.
	ErrInvalidPolicy = errors.New("httpretry: invalid policy")

	// ErrInvalidConfig reports a configuration that cannot be read as a
	// Policy: malformed JSON, an unknown or repeated field, a value of the
	// wrong type, a duration or name that does not parse, a field that does not
	// apply (a ratio budget's numbers on a token bucket). Values that parse but
	// make no sense as a policy wrap ErrInvalidPolicy instead, as
	// (*Transport).Validate reports them.
	ErrInvalidConfig = errors.New("httpretry: invalid config")

	// ErrRequestBody reports that reading the request body failed before the
	// first attempt (while buffering it for replay) or that GetBody failed
	// before a retry.
	ErrRequestBody = errors.New("httpretry: request body")

	// ErrCircuitOpen reports that a circuit breaker refused the attempt. It
	// is never retried.
	ErrCircuitOpen = errors.New("httpretry: circuit breaker is open")

	// ErrBudgetExhausted reports that the retry budget refused a retry.
	ErrBudgetExhausted = errors.New("httpretry: retry budget exhausted")
)

// StopReason says why a RoundTrip stopped. It is set on the last attempt
// reported to Transport.OnAttempt, on the Call reported to Transport.OnCall,
// and on a RetryError.
type StopReason int

// Why a RoundTrip stopped. The zero value, StopNone, means it has not.
const (
	StopNone             StopReason = iota // retrying continues after this attempt
	StopSuccess                            // the response was classified a success
	StopFatal                              // the outcome is not worth retrying (a 404, a certificate error, …)
	StopAttempts                           // MaxAttempts reached
	StopNotReplayable                      // the request could not safely be sent again
	StopContext                            // the caller's context ended
	StopDeadline                           // the next wait would end after the context's deadline
	StopRetryAfter                         // the server asked for a wait above MaxRetryAfter (Retry-After or a rate-limit hint)
	StopBudget                             // the retry budget refused the retry
	StopInvalid                            // the request or policy was invalid; nothing was sent
	StopBreaker                            // the circuit breaker is open
	StopRefused                            // Policy.PrepareRetry refused the retry
	StopThrottled                          // adaptive throttling refused the attempt (ErrThrottled)
	StopConcurrencyLimit                   // the concurrency limit refused the attempt (ErrConcurrencyLimit)
	StopRateLimited                        // the host's announced rate limit is spent (ErrRateLimited)
)

var stopNames = [...]string{
	StopNone:             "none",
	StopSuccess:          "success",
	StopFatal:            "not retryable",
	StopAttempts:         "attempts exhausted",
	StopNotReplayable:    "request not replayable",
	StopContext:          "context done",
	StopDeadline:         "wait would pass the deadline",
	StopRetryAfter:       "server-requested wait above MaxRetryAfter",
	StopBudget:           "retry budget exhausted",
	StopInvalid:          "invalid request or policy",
	StopBreaker:          "circuit breaker open",
	StopRefused:          "retry refused by PrepareRetry",
	StopThrottled:        "throttled",
	StopConcurrencyLimit: "concurrency limit reached",
	StopRateLimited:      "rate limit spent",
}

// String returns a short lower-case description, as used in logs, metrics
// and errors.
func (r StopReason) String() string {
	if r >= 0 && int(r) < len(stopNames) {
		return stopNames[r]
	}
	return "StopReason(" + strconv.Itoa(int(r)) + ")"
}

// RetryError is returned by RoundTrip when it ends without a response.
// errors.Is and errors.As reach the last attempt's error (a *net.OpError,
// a TLS certificate error, …) and the cause that ended retrying through
// Unwrap. Whenever the caller's context ended, errors.Is reports
// context.Canceled or context.DeadlineExceeded, even when the context was
// cancelled with a cause of its own. Timeout reports true, as net/http's
// errors do, when the deadline passed or the last attempt timed out.
//
// When RoundTrip does get a response it returns that response, not a
// RetryError, even when the response is a failure such as a 503. The one
// exception: a response whose body was drained while its retry was being
// decided, and was longer than the 64 KiB kept in memory, is gone if the
// retry is then not sent (the deadline no longer fits, the breaker opened,
// PrepareRetry refused); the RetryError then has its status in LastStatus.
type RetryError struct {
	Attempts   int        // attempts made, including the first; 0 if nothing was sent
	Err        error      // the last attempt's error, or why nothing could be sent; nil after a response
	LastStatus int        // status code of the last response seen, 0 if none
	Reason     StopReason // why retrying stopped
	Cause      error      // what ended retrying, when that is not Err: the context's cause, ErrBudgetExhausted, …

	ctxErr error // context.Canceled or DeadlineExceeded when the caller's context ended
}

// Error says why retrying stopped, after how many attempts, the last status
// seen, and the errors it wraps.
func (e *RetryError) Error() string {
	var b strings.Builder
	b.WriteString("httpretry: ")
	errs := make([]error, 0, 2)
	for _, err := range [...]error{e.Err, e.Cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	switch {
	case e.Attempts == 0 && len(errs) > 0:
		// Nothing was sent: the error says why.
	case e.Reason == StopAttempts:
		fmt.Fprintf(&b, "%d attempts failed", e.Attempts)
	case e.Attempts == 0:
		b.WriteString(e.Reason.String())
	default:
		fmt.Fprintf(&b, "%s after %d attempt", e.Reason, e.Attempts)
		if e.Attempts > 1 {
			b.WriteByte('s')
		}
	}
	if e.LastStatus != 0 {
		fmt.Fprintf(&b, " (last status %d)", e.LastStatus)
	}
	sep := ": "
	if e.Attempts == 0 && e.LastStatus == 0 {
		sep = ""
	}
	for _, err := range errs {
		b.WriteString(sep)
		b.WriteString(strings.TrimPrefix(err.Error(), "httpretry: "))
		sep = ": "
	}
	return b.String()
}

// Unwrap returns Err and Cause, whichever are set, and the caller's context
// error when the context ended.
func (e *RetryError) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range [...]error{e.Err, e.Cause, e.ctxErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Timeout reports whether the call ended because time ran out: the caller's
// deadline passed or would have passed during the next wait, or the last
// attempt timed out. It makes url.Error.Timeout and os.IsTimeout answer as
// they do without the Transport.
func (e *RetryError) Timeout() bool {
	if e.Reason == StopDeadline || errors.Is(e.ctxErr, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// contextEnded records that the caller's context ctx ended, so that
// errors.Is reports ctx.Err() whatever cause the context was given.
func (e *RetryError) contextEnded(ctx context.Context) *RetryError {
	e.ctxErr = ctx.Err()
	return e
}

// fieldError is one problem with a configuration, at a field path: in Go's
// names for Validate (Transport.Hosts["api.example.com"].MaxAttempts), in
// the config's own for a Config (hosts["api.example.com"].max_attempts), or,
// for FromEnv, an environment variable. It wraps ErrInvalidPolicy or
// ErrInvalidConfig.
type fieldError struct {
	kind error // ErrInvalidConfig or ErrInvalidPolicy
	path string
	msg  string
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return e.kind.Error() + ": " + e.msg
	}
	return e.kind.Error() + ": " + e.path + ": " + e.msg
}

func (e *fieldError) Unwrap() error { return e.kind }
