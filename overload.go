package httpretry

import (
	"context"
	"errors"
	"net"
	"net/http"
)

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

// signal is what one attempt's outcome says about the host's load, as the
// throttle and the concurrency limiter count it.
type signal uint8

const (
	// signalNone: the outcome says nothing about load and is not counted:
	// the caller cancelled, no server took part (DNS, a refused
	// connection), or a local control refused the attempt.
	signalNone signal = iota
	// signalAccepted: the host took the request and answered it in time,
	// whatever the answer (2xx–4xx but 429, and 500, 501, 505: a server
	// that fails a request it processed is the retry budget's business).
	signalAccepted
	// signalOverloaded: the host, or a gateway before it, turned the
	// request away (429, 502, 503, HTTP/2 REFUSED_STREAM, a connection
	// reset or closed before the response) or did not answer it in time
	// (an attempt or network timeout, the caller's deadline, a 504).
	signalOverloaded
)

// loadSignal says what an attempt's outcome tells about its host's load.
// ctx is the caller's context: an attempt it cancelled says nothing, one
// cut short by its deadline was too slow for its caller. Exactly one of
// resp and err should be non-nil; a hedge that lost to another is the
// caller's business and should not be given here.
//
// The line is drawn where the SRE book draws it: an accept is a request
// the backend accepted. Explicit refusals (429 and 503, RFC 9110 § 15.6.4's
// "temporary overload"), a gateway that gave up on the host (502, 504) and
// silence until a timeout (the overload symptom of Bronson et al.'s
// metastable retry loop) count against the host; an answer the host meant
// to give counts for it, even an error. What no server took part in
// (refused connections, DNS) is left to the circuit breaker.
func loadSignal(ctx context.Context, resp *http.Response, err error) signal {
	if err == nil {
		if resp == nil {
			return signalNone
		}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return signalOverloaded
		}
		return signalAccepted
	}
	if refusedLocally(err) {
		return signalNone
	}
	if ctx != nil {
		switch ctx.Err() {
		case context.Canceled:
			return signalNone
		case context.DeadlineExceeded:
			return signalOverloaded
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, ErrAttemptTimeout), errors.As(err, &ne) && ne.Timeout():
		return signalOverloaded // dial timeouts included: a full accept queue drops SYNs
	case h2Error(err, h2RefusedStream):
		return signalOverloaded
	case classifyError(err) == ClassTransient:
		return signalOverloaded // resets, EOF before the response, GOAWAY
	}
	return signalNone // not processed, fatal, or an error these rules do not know
}

// refusedLocally reports whether err is a refusal by one of the Transport's
// own controls, which must never be mistaken for the host's answer.
func refusedLocally(err error) bool {
	return errors.Is(err, ErrThrottled) || errors.Is(err, ErrConcurrencyLimit) ||
		errors.Is(err, ErrRateLimited) || isBreakerOpen(err)
}
