package httpretry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// OverloadPolicy turns on the overload controls of a host: three ways of
// shedding load at the client, before a byte leaves the process, when the
// host shows that it is overloaded or announces that its quota is spent.
// They complement the retry budget, which caps retries only, while first
// attempts keep pouring in. Each is off unless turned on: each can hurt a
// healthy host whose traffic does not fit its assumption (see the fields).
//
//	Overload: httpretry.OverloadPolicy{Throttle: true, Limit: true}
//
// A refusal by any of them costs no attempt, no budget and is never retried:
// a refused first attempt fails the call with a *RetryError wrapping
// ErrThrottled, ErrConcurrencyLimit or ErrRateLimited (Attempts 0); a
// refused retry ends the call with the answer in hand, as an open breaker
// does. The refusal is reported in Call.Stop (StopThrottled,
// StopConcurrencyLimit, StopRateLimited) and one log record, not to
// OnAttempt, which sees only attempts Base saw. Waits (for pacing, in the
// waiting room) come before the attempt; its AttemptTimeout starts after
// them.
//
// Throttling and the concurrency limit learn from every attempt's outcome:
// 429, 502, 503, 504, refused HTTP/2 streams, resets and timeouts
// (AttemptTimeout's, the network's, the caller's deadline) count as
// overload; any other answer the host gave, 500 included, as accepted; what
// no server took part in (DNS, refused connections) and the caller's own
// cancellation are not counted.
//
// It is a per-host setting: a path key in Hosts and WithPolicy cannot change
// it. The zero value turns nothing on; in Hosts a zero OverloadPolicy
// inherits and a non-zero one replaces the inherited one as a whole. A host
// with a control on gets per-host state at its first request (Stats lists
// it), dropped once it is back at rest.
type OverloadPolicy struct {
	// Throttle turns on client-side adaptive throttling (Google SRE book,
	// "Handling Overload", equation 21-1): over ThrottleWindow, an attempt
	// is rejected locally with probability
	// max(0, (requests − ThrottleK·accepts) / (requests + 1)), at most 0.9,
	// once the window holds 10 outcomes; rejections count as requests. The
	// host then sees at most about ThrottleK attempts for each it accepts.
	// It suits a host that sheds load with 429 or 503; failures that do
	// not depend on load throttle it too once they exceed 1 − 1/ThrottleK
	// of attempts (half, with the default K). false means off.
	Throttle bool

	// ThrottleK is the multiplier of accepts. 0 means 2, the SRE book's
	// preference; 1.1 is its aggressive setting, which keeps the load of a
	// shedding host within 10 % of what it accepts but throttles a host
	// failing more than 9 % of attempts for any reason. Below 1 is invalid.
	ThrottleK float64

	// ThrottleWindow is how far back outcomes are counted, sliding in
	// tenths. 0 means 10 s (the SRE book: 2 min; Envoy's admission control:
	// 30 s; a shorter window recovers sooner after an overload ends).
	// Negative is invalid.
	ThrottleWindow time.Duration

	// Limit turns on an adaptive concurrency limit on the attempts in
	// flight to the host: AIMD, after Netflix's concurrency-limits
	// AIMDLimit. It starts at LimitMax; an overloaded outcome, or an answer
	// that took more than half its attempt's time (its AttemptTimeout or
	// the caller's deadline) and more than twice the host's fastest, halves
	// it to half the attempts then in flight, once per episode; each accept
	// while half the limit is in use raises it by one; an idle limit
	// returns to LimitMax 30 s after its last cut. A slot is held from
	// admission until the response header arrives (or the attempt fails),
	// not while the caller reads the body. Attempts over the limit wait in
	// a FIFO waiting room (see LimitQueue). It suits any host that queues
	// work; one path that normally takes more than half its timeout on a
	// host shared with fast paths reads as slow. false means off.
	Limit bool

	// LimitMax is the limit a host starts from and grows back to. 0 means
	// 1000 (Envoy's adaptive-concurrency ceiling). Negative is invalid.
	LimitMax int

	// LimitMin is the floor the limit never falls below. 0 means 1.
	// Negative, or above LimitMax, is invalid.
	LimitMin int

	// LimitQueue is how many attempts may wait for a slot, each for as long
	// as its context allows. 0 means as many as the current limit, so that
	// a burst waits about one round of the host's work; negative means no
	// waiting room: an attempt over the limit fails at once with
	// ErrConcurrencyLimit. A hedge never waits.
	LimitQueue int

	// Pace turns on pacing by the rate limit the host announces: after a
	// 429 with Retry-After, a RateLimit field (unless Hints.IgnoreRateLimit)
	// or Hints.RemainingHeader with Hints.ResetHeader, later attempts are
	// sent only while the announced quota has requests left; the others
	// wait for the reset, within MaxRetryAfter and the caller's deadline,
	// jittered up to 10 % later, or fail with ErrRateLimited when it is
	// further away. It suits an API with one quota per client, as GitHub's
	// and Stripe's are; a host that keeps a quota per endpoint would have
	// every endpoint wait for one's reset. false means off.
	Pace bool

	// PaceFailFast refuses an attempt with ErrRateLimited at once while the
	// announced quota is spent, instead of waiting for its reset (what
	// go-github does). false means wait.
	PaceFailFast bool

	// Disabled turns every control off, even where the policy would
	// inherit them.
	Disabled bool
}

// Defaults of OverloadPolicy.
const (
	defaultThrottleK      = 2
	defaultThrottleWindow = 10 * time.Second
	defaultLimitMax       = 1000
)

// on reports whether any control is on.
func (o *OverloadPolicy) on() bool {
	return !o.Disabled && (o.Throttle || o.Limit || o.Pace)
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
