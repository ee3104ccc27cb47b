package httpretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/seedhq/httpretry/internal/replay"
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

	// ErrRequestBody reports that the request body itself failed: it broke
	// while an attempt was sending it, it does not match its ContentLength,
	// or, before a retry, GetBody or Seek failed or the body could not be
	// had again (it outgrew the copy kept of it, or a stream was still
	// being read). It is never retried.
	ErrRequestBody = replay.ErrBody

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
	Stop       StopReason // why retrying stopped
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
	case e.Stop == StopAttempts:
		fmt.Fprintf(&b, "%d attempts failed", e.Attempts)
	case e.Attempts == 0:
		b.WriteString(e.Stop.String())
	default:
		fmt.Fprintf(&b, "%s after %d attempt", e.Stop, e.Attempts)
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
	if e.Stop == StopDeadline || errors.Is(e.ctxErr, context.DeadlineExceeded) {
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

// PolicyError is one invalid setting, as (*Transport).Validate reports it:
// Validate joins one per problem with errors.Join, so errors.As finds the
// first and the joined error's Unwrap() []error lists them all. A
// per-request WithPolicy edit that breaks a rule fails with one too. It
// wraps ErrInvalidPolicy.
type PolicyError struct {
	// Path locates the setting, in Go's names, from the Transport down:
	// "Policy", or "Hosts" and the entry's key; then the fields of the
	// Policy and of its sub-policies, and a list's index as a decimal
	// number: {"Hosts", "api.example.com", "Keys", "Methods", "1"}. A
	// Hosts key that is not a valid pattern is reported at {"Hosts", key}.
	// The path of a WithPolicy edit starts with "WithPolicy".
	Path []string

	format string
	args   []any // a settingRef is a setting the message names
}

// settingRef is a setting that a PolicyError's message names, a path as
// PolicyError.Path.
type settingRef []string

// Error names the setting with its path in Go's syntax, such as
// Transport.Hosts["api.example.com"].Keys.Methods[1].
func (e *PolicyError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidPolicy.Error())
	b.WriteString(": ")
	for i, el := range e.Path {
		switch {
		case i == 0 && el != "WithPolicy":
			b.WriteString("Transport.")
			b.WriteString(el)
		case i == 1 && e.Path[0] == "Hosts":
			b.WriteString("[" + strconv.Quote(el) + "]")
		case el != "" && el[0] >= '0' && el[0] <= '9':
			b.WriteString("[" + el + "]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(el)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Message(goName))
	return b.String()
}

// Message says what is wrong, without the path. Where it names another
// setting (a breaker without a trip rule names ConsecutiveFailures and
// FailureRatio), it calls name with that setting's path, as Path: a
// configuration format names settings in its own words this way. Error
// uses the Go field's name, and Transport.Policy for {"Policy"}.
func (e *PolicyError) Message(name func(path []string) string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if r, ok := a.(settingRef); ok {
			a = name(r)
		}
		args[i] = a
	}
	return fmt.Sprintf(e.format, args...)
}

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// goName names the setting at path in Go's words, for messages.
func goName(path []string) string {
	if len(path) == 1 && path[0] == "Policy" {
		return "Transport.Policy"
	}
	return path[len(path)-1]
}

// Sentinel errors of the overload controls: a request refused locally,
// before any byte of it left the process. A *RetryError wraps them; test
// with errors.Is. None of them is ever retried, and a refused attempt is
// not counted against MaxAttempts.
var (
	// ErrThrottled reports that adaptive throttling refused the attempt:
	// the host has recently turned away too many of the attempts sent to
	// it, so this one was rejected at the client, as the Google SRE book's
	// client-side throttling does, instead of adding to the host's load.
	ErrThrottled = errors.New("httpretry: throttled: host is rejecting too many requests")

	// ErrConcurrencyLimit reports that the host's adaptive concurrency limit
	// was reached and its waiting room was full or the wait ended first.
	ErrConcurrencyLimit = errors.New("httpretry: concurrency limit reached")

	// ErrRateLimited reports that the host announced that its rate limit
	// is spent (a RateLimit field with r=0, a remaining-requests header at
	// 0, a 429 with Retry-After) and the reset is further away than
	// MaxRetryAfter or the context's deadline, or the policy fails fast.
	ErrRateLimited = errors.New("httpretry: rate limit spent")
)
