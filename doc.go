// Package httpretry makes HTTP calls to flaky upstreams succeed without
// making outages worse.
//
// [Transport] is an [http.RoundTripper] decorator: set it as the Transport
// of an [http.Client], or hand such a client to any SDK that accepts one.
// It retries what is transient (408, 425, 429, 500, 502, 503, 504, timeouts
// and connection failures) and nothing else; replays request bodies without
// copying them when the request has GetBody; adds an Idempotency-Key to POST
// and PUT, which makes retrying them safe on a server that deduplicates by
// it (turn keys off for one that does not: [KeyPolicy]); obeys Retry-After
// within bounds; waits
// with exponential full-jitter backoff (package backoff) so clients that
// failed together do not return together; and never waits past the
// caller's context.
//
//	client := &http.Client{Transport: &httpretry.Transport{}}
//
// Policies are set per host and per path ([Transport.Hosts], each entry
// inheriting what it leaves zero from [Transport.Policy]) and changed for
// one call through its context ([WithPolicy], [WithoutRetries]), which
// reaches through any SDK that takes a context.Context. Call
// [Transport.Validate] at start-up to see every configuration error at once.
//
// # Layering
//
// Put httpretry above everything that must run once per attempt:
//
//	http.Client → httpretry.Transport → signer / auth / tracing → http.Transport
//
// Then every attempt is signed afresh (a signature with a timestamp or a
// nonce goes stale), every attempt gets its own trace span, and the
// http.Client's redirect handling and cookie jar see one logical request.
// Layers under the Transport can read the attempt number with
// [AttemptFromContext].
//
// # Which requests are retried
//
// GET, HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent (RFC 9110
// § 9.2.2), and so is any request with an Idempotency-Key or
// X-Idempotency-Key header: these are retried after any transient failure.
// Other requests, such as a POST whose key injection was disabled or a
// PATCH, are retried only when the failure proves the server never processed
// them: a dial error, a refused connection, an HTTP/2 REFUSED_STREAM. A body
// larger than Policy.MaxReplayBytes without GetBody is sent once.
//
// # Outcome
//
// When attempts run out on a response, RoundTrip returns that last response
// untouched, so the caller sees the server's own answer. Only when there is
// no response does it return a [*RetryError], which wraps the last error for
// errors.Is and errors.As and records the attempts made, the last status
// seen and why retrying stopped.
//
// A call succeeds once the response header arrives, unless
// [Policy.ReadBodyBytes] asks for more: then a body of at most that size
// is read within its attempt, so that a connection cut mid-body is a
// failed attempt, retried by the rules above (never as not processed: the
// server answered), and Policy.Classify can decide on what the body says.
// A GET's body that breaks later, while the caller reads it, is resumed
// from where it stopped when that is safe ([Policy.MaxResumes]): only the
// rest of the same representation is read on, anything else ends the read
// with a [*ResumeError].
//
// # Overload
//
// A retry budget caps retries; [Policy.Overload] ([OverloadPolicy]) also
// sheds first attempts at the client, per host and opt-in: adaptive
// throttling after the Google SRE book, an adaptive concurrency limit with
// a waiting room, and pacing by the rate limit the host announces. Their
// refusals fail fast with [ErrThrottled], [ErrConcurrencyLimit] or
// [ErrRateLimited] and cost no attempt.
//
// # Observing it
//
// [Transport.Logger] gets one record per attempt, [Transport.OnAttempt] one
// [Attempt] per attempt, [Transport.OnCall] one [Call] per RoundTrip, and
// [Transport.Stats] returns the per-host state (retry budget, breaker,
// overload controls) at any time, and [Transport.StatsPage] a page of it,
// hosts in trouble first, which package statuspage serves to operators; a call that sent nothing, refused by an overload control
// or the breaker, is reported to OnCall with its [StopReason], not to
// OnAttempt. The otelhttpretry module turns all of it into OpenTelemetry
// metrics and traces. Package httpretrytest fakes flaky upstreams for
// tests, and package chaos injects faults for rehearsals.
//
// # The caveat
//
// An http.RoundTripper "should not attempt to handle higher-level protocol
// details such as redirects, authentication, or cookies" and should execute
// a single HTTP transaction. Transport deliberately executes several: that
// is its purpose. It keeps the rest of the contract: it never modifies the
// caller's request (each attempt is a clone), it always closes the request
// body, it returns a response or an error, never both, and it drains and
// closes every response it discards.
//
// [RFC 9110 § 9.2.2]: https://www.rfc-editor.org/rfc/rfc9110#section-9.2.2
package httpretry
