package httpretry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. A *RetryError wraps them; test with errors.Is.
var (
	// ErrInvalidRequest reports a request that cannot be sent at all: a nil
	// URL, no host, an unsupported scheme, a malformed header. No attempt is
	// made and the request body is closed.
	ErrInvalidRequest = errors.New("httpretry: invalid request")

	// ErrInvalidPolicy reports a Policy with nonsense values or a Hosts key
	// that is not a valid host pattern. Every request through the Transport
	// fails with it until the configuration is fixed.
	ErrInvalidPolicy = errors.New("httpretry: invalid policy")

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

// StopReason says why a RoundTrip stopped retrying.
type StopReason int

// Why retrying stopped. The zero value, StopNone, means it did not.
const (
	StopNone          StopReason = iota // retrying continues, or the attempt succeeded
	StopSuccess                         // the response was classified a success
	StopFatal                           // the outcome is not worth retrying (a 404, a certificate error, …)
	StopAttempts                        // MaxAttempts reached
	StopNotReplayable                   // the request could not safely be sent again
	StopContext                         // the caller's context ended
	StopDeadline                        // the next wait would end after the context's deadline
	StopRetryAfter                      // the server asked for a wait above MaxRetryAfter (Retry-After or a rate-limit hint)
	StopBudget                          // the retry budget refused the retry
	StopInvalid                         // the request or policy was invalid; nothing was sent
	StopBreaker                         // the circuit breaker is open
	StopHedgeLost                       // a hedge answered first; this attempt was cancelled
)

var stopNames = [...]string{
	StopNone:          "none",
	StopSuccess:       "success",
	StopFatal:         "not retryable",
	StopAttempts:      "attempts exhausted",
	StopNotReplayable: "request not replayable",
	StopContext:       "context done",
	StopDeadline:      "wait would pass the deadline",
	StopRetryAfter:    "server-requested wait above MaxRetryAfter",
	StopBudget:        "retry budget exhausted",
	StopInvalid:       "invalid request or policy",
	StopBreaker:       "circuit breaker open",
	StopHedgeLost:     "lost to a faster hedge",
}

// String returns a short lower-case description, as used in logs and errors.
func (r StopReason) String() string {
	if r >= 0 && int(r) < len(stopNames) {
		return stopNames[r]
	}
	return "StopReason(" + strconv.Itoa(int(r)) + ")"
}

// RetryError is returned by RoundTrip when it ends without a response.
// errors.Is and errors.As reach the last attempt's error (a *net.OpError,
// context.Canceled, a TLS certificate error, …) through Unwrap.
//
// When RoundTrip does get a response it returns that response, never a
// RetryError, even when the response is a failure such as a 503.
type RetryError struct {
	Attempts   int        // attempts made, including the first; 0 if nothing was sent
	Err        error      // the last attempt's error, or why nothing could be sent
	LastStatus int        // status code of the last response seen, 0 if none
	Reason     StopReason // why retrying stopped
	Cause      error      // what ended retrying, when that is not Err: the context's cause, ErrBudgetExhausted, …
}

func (e *RetryError) Error() string {
	var b strings.Builder
	b.WriteString("httpretry: ")
	if e.Attempts > 0 {
		fmt.Fprintf(&b, "%d attempt", e.Attempts)
		if e.Attempts > 1 {
			b.WriteByte('s')
		}
		b.WriteString(", ")
	}
	b.WriteString(e.Reason.String())
	if e.LastStatus != 0 {
		fmt.Fprintf(&b, " (last status %d)", e.LastStatus)
	}
	for _, err := range e.Unwrap() {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(err.Error(), "httpretry: "))
	}
	return b.String()
}

// Unwrap returns Err and Cause, whichever are set.
func (e *RetryError) Unwrap() []error {
	switch {
	case e.Err != nil && e.Cause != nil && e.Cause != e.Err:
		return []error{e.Err, e.Cause}
	case e.Err != nil:
		return []error{e.Err}
	case e.Cause != nil:
		return []error{e.Cause}
	}
	return nil
}
