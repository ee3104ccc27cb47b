package httpretry

import (
	"cmp"
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry/internal/hostkey"
	"github.com/seedhq/httpretry/internal/pacer"

	"github.com/seedhq/httpretry/backoff"
)

// Policy says when and how to retry. The zero Policy is the default policy:
// 4 attempts, exponential full-jitter backoff from 100 ms capped at 3 s,
// Retry-After obeyed up to 60 s, bodies without GetBody buffered up to 1 MiB,
// an Idempotency-Key on POST and PUT, a retry budget per host.
//
// A Policy is never written to: defaults are resolved when it is used, so
// one value can be shared. In Transport.Hosts and in WithPolicy a field left
// zero inherits (see Transport.Hosts); the sub-policies (Keys, Breaker,
// Overload, Hedge, Hints) are inherited or replaced as a whole.
type Policy struct {
	// MaxAttempts counts tries including the first, hedges included. 0
	// means 4; 1 disables retries. A negative value is invalid.
	MaxAttempts int

	// Backoff computes the wait before each retry. Nil means
	// backoff.Default(): exponential, full jitter, base 100 ms, cap 3 s.
	// A strategy with a Validate() error method is validated once.
	Backoff backoff.Strategy

	// AttemptTimeout bounds each attempt from sending the request until
	// its response header arrives, or, for a body read before RoundTrip
	// returns (ReadBodyBytes), until that body is read. The attempt's
	// context then lives until the response body is closed, so a slow body
	// not read ahead still streams in full. It never shortens the caller's
	// context. An attempt that times out is retried like any transient
	// failure. 0 means no per-attempt limit (or
	// the inherited one, in Hosts and WithPolicy); a negative value means no
	// limit, overriding an inherited one.
	AttemptTimeout time.Duration

	// MaxRetryAfter is the longest server-requested wait obeyed. A response
	// asking for more (Retry-After or a rate-limit hint) ends retrying and is
	// returned to the caller at once; a request paced by an announced rate
	// limit (OverloadPolicy.Pace) that resets later is refused. 0 means 60 s.
	// A negative value is invalid.
	MaxRetryAfter time.Duration

	// MaxReplayBytes limits how much of a request body without GetBody is
	// buffered so it can be sent again. A larger body is streamed once,
	// unbuffered, and the request is not retried. 0 means 1 MiB; a negative
	// value means never buffer.
	MaxReplayBytes int64

	// ReadBodyBytes makes RoundTrip read a response body of at most this
	// many bytes before it returns, as part of the attempt. A failure while
	// reading it is a failure of the attempt, classified and retried like
	// any other, but never as not processed, since the server answered: an
	// unkeyed POST whose answer was lost is not sent again, a keyed one is,
	// with its key. AttemptTimeout bounds the read, a hedged round's race
	// counts it, and Classify may read the bytes (see Classify). The caller
	// gets the whole body, unread, from memory. A larger body (a
	// Content-Length above the limit, or more bytes arriving) is returned
	// as a stream, as without it, with the bytes already read in front of
	// the rest; an attempt holds at most ReadBodyBytes+1 bytes. A response
	// that is a stream by its media type (text/event-stream, NDJSON, a
	// Kubernetes watch, ...) is not read ahead, and a body of unknown
	// length is read for at most 250 ms, so that a stream's header reaches
	// the caller at once; what has not come by then streams, as the rest
	// of a larger body does (see docs/policy.md). 0 means no
	// body is read before RoundTrip returns (or the inherited limit, in
	// Hosts and WithPolicy); a negative value means none is, overriding an
	// inherited limit.
	ReadBodyBytes int64

	// MaxResumes is how many times in a row the body of a GET's response,
	// handed to the caller, may be resumed when reading it fails with a
	// transient error after some bytes; a resume that delivers bytes before
	// the body breaks again starts the count, and the backoff, afresh, so a
	// long download cut many times completes while each resume brings
	// progress. The Transport asks for the rest (Range, with
	// If-Range carrying the response's strong validator) and the caller's
	// Read goes on where it stopped. Only a 206 of the same representation
	// that starts where the read stopped is accepted; anything else ends
	// the read with a *ResumeError, never with bytes of another
	// representation. Only a 200 to a GET without a body, a Range of the
	// caller's or hedging, with a strong validator (a strong ETag, or a
	// Last-Modified at least a second before its Date), no Content-Encoding
	// and no Accept-Ranges: none is resumed. A resume is an attempt of the
	// call (Attempt.Resume): admitted, charged to the budget and waited
	// for by the backoff like a retry, bounded by the caller's context and
	// by AttemptTimeout until its header arrives. 0 means MaxAttempts-1
	// (or the inherited value, in Hosts and WithPolicy); a negative value
	// means no resume, overriding an inherited value.
	MaxResumes int

	// Classify, if non-nil, classifies each attempt's outcome before the
	// built-in rules (see the package-level Classify function); returning
	// ClassDefault falls back to them. req is the attempt's request, with
	// its idempotency key. Exactly one of resp and err is non-nil; Classify
	// must not close resp.Body, nor read it unless ReadBodyBytes is set.
	// Then, while Classify runs, resp.Body reads the bytes read ahead: the
	// whole body when it fits the limit, else those read of it (none when
	// its Content-Length is above the limit) followed by an error, never
	// more than ReadBodyBytes; whatever Classify reads, the caller gets the
	// body from its start. It is called from many goroutines at once
	// (hedged attempts included).
	Classify func(req *http.Request, resp *http.Response, err error) Class

	// PrepareRetry, if non-nil, is called before each retry is sent, after
	// the wait, with the attempt that failed and the request of the next
	// one: a clone of the caller's request that the function may edit (set
	// or delete headers, such as a refreshed Authorization after a 401 that
	// Classify made transient). The caller's request is never touched.
	// prev.Response's body has already been drained and closed: do not
	// read it. Returning an error sends no retry: the call ends with the
	// failure in hand (StopRefused), and the error is wrapped in the
	// RetryError when there is no response to return. Nil means retries are
	// sent as they are. It runs on the RoundTrip goroutine.
	PrepareRetry func(prev Attempt, next *http.Request) error

	// Keys configures the Idempotency-Key header that makes retrying a POST
	// or PUT safe on a server that deduplicates by it. The zero value adds
	// a bare UUIDv4 to POST and PUT.
	Keys KeyPolicy

	// AttemptHeader, if set, names a request header that carries the attempt
	// number (1 for the first) on every attempt, so a server can see retries
	// and shed them first (like Envoy's x-envoy-attempt-count). It must not
	// name an idempotency-key header. "" means no such header.
	AttemptHeader string

	// NewBudget creates the retry budget of one host: the Transport calls it
	// with the host's key ("host:port", as Attempt.Host) when it first needs
	// per-host state for that host, so one failing host never spends
	// another's budget. Nil means DefaultBudget, a token bucket that is
	// invisible while failures are rare and stops retries under sustained
	// failure; NoBudget turns budgeting off. It is a per-host setting: a
	// path key in Hosts and WithPolicy cannot change it.
	NewBudget func(host string) Budget

	// Breaker configures a circuit breaker per host. The zero value means
	// none. It is a per-host setting: a path key in Hosts and WithPolicy
	// cannot change it.
	Breaker BreakerPolicy

	// Overload turns on the overload controls per host: adaptive
	// throttling, an adaptive concurrency limit, pacing by the host's
	// announced rate limit. The zero value turns none on. It is a per-host
	// setting: a path key in Hosts and WithPolicy cannot change it.
	Overload OverloadPolicy

	// Hedge configures hedged attempts for requests that are safe to send
	// twice. The zero value sends none.
	Hedge HedgePolicy

	// Hints configures the server hints read besides Retry-After: a
	// should-retry header, the RateLimit header field, a legacy reset
	// header. The zero value reads the RateLimit field only.
	Hints HintPolicy

	// Endpoints names failover endpoints for the request's host, in order
	// of preference: "host" or "host:port" (a port left out is the
	// scheme's default), such as "api.us.example.com". Each attempt goes
	// to the first of the request's own host and then these endpoints
	// whose breaker and throttle admit it; a retry prefers one that has
	// not failed in the call, a hedge one its round has no attempt out
	// on. An attempt sent elsewhere is the caller's request with the
	// endpoint as its URL's host and its Host header, and the same
	// Idempotency-Key. A request that may not be sent twice (an unkeyed
	// POST, a body that cannot be replayed) never moves. Each endpoint
	// has its own per-host state, made by the Hosts entry of the
	// endpoint's host if there is one, else by the request's policy.
	//
	// Endpoints belong to the exact host key they fail over for (a
	// "host" or "host:port" key of Transport.Hosts) and its path keys:
	// on Transport.Policy or a wildcard key they would move the requests
	// of other hosts, third parties' included, with their credentials,
	// and Validate refuses them there. WithPolicy may keep, drop or
	// reorder the endpoints of its request's host, not add one. Nil means
	// no failover (or, on a path key and in WithPolicy, the host key's
	// list); an empty non-nil list means none, overriding it. See
	// docs/policy.md.
	Endpoints []string
}

// Defaults applied when a Policy field is zero, as the fields say.
const (
	defaultMaxAttempts    = 4
	defaultMaxRetryAfter  = 60 * time.Second
	defaultMaxReplayBytes = 1 << 20
)

// inherit returns p with every field it leaves zero taken from parent.
// Scalars and functions inherit each on its own; the sub-policies (Keys,
// Breaker, Overload, Hedge, Hints) are taken as a whole, so a sub-policy
// set at all replaces the inherited one.
func (p Policy) inherit(parent Policy) Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = parent.MaxAttempts
	}
	if p.Backoff == nil {
		p.Backoff = parent.Backoff
	}
	if p.AttemptTimeout == 0 {
		p.AttemptTimeout = parent.AttemptTimeout
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = parent.MaxRetryAfter
	}
	if p.MaxReplayBytes == 0 {
		p.MaxReplayBytes = parent.MaxReplayBytes
	}
	if p.ReadBodyBytes == 0 {
		p.ReadBodyBytes = parent.ReadBodyBytes
	}
	if p.MaxResumes == 0 {
		p.MaxResumes = parent.MaxResumes
	}
	if p.Classify == nil {
		p.Classify = parent.Classify
	}
	if p.PrepareRetry == nil {
		p.PrepareRetry = parent.PrepareRetry
	}
	if p.Keys.zero() {
		p.Keys = parent.Keys
	}
	if p.AttemptHeader == "" {
		p.AttemptHeader = parent.AttemptHeader
	}
	if p.NewBudget == nil {
		p.NewBudget = parent.NewBudget
	}
	if p.Breaker == (BreakerPolicy{}) {
		p.Breaker = parent.Breaker
	}
	if p.Overload == (OverloadPolicy{}) {
		p.Overload = parent.Overload
	}
	if p.Hedge == (HedgePolicy{}) {
		p.Hedge = parent.Hedge
	}
	if p.Hints == (HintPolicy{}) {
		p.Hints = parent.Hints
	}
	if p.Endpoints == nil {
		p.Endpoints = parent.Endpoints
	}
	return p
}

// zero reports whether k is the zero KeyPolicy.
func (k *KeyPolicy) zero() bool {
	return !k.Disabled && k.Methods == nil && k.Header == "" && k.New == nil && !k.Quoted
}

// perHostSet names the per-host fields (NewBudget, Breaker, Overload) that
// p sets. They configure per-host state: a path key or a per-request
// override cannot change them, so that every request to a host shares one
// budget, one breaker and one set of overload controls.
func (p *Policy) perHostSet() []string {
	var set []string
	if p.NewBudget != nil {
		set = append(set, "NewBudget")
	}
	if p.Breaker != (BreakerPolicy{}) {
		set = append(set, "Breaker")
	}
	if p.Overload != (OverloadPolicy{}) {
		set = append(set, "Overload")
	}
	return set
}

// resolved returns p with the defaults of its scalar settings filled in,
// as WithPolicy's functions see it.
func (p Policy) resolved() Policy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, defaultMaxAttempts)
	if p.Backoff == nil {
		p.Backoff = backoff.Default()
	}
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, defaultMaxRetryAfter)
	p.MaxReplayBytes = cmp.Or(p.MaxReplayBytes, defaultMaxReplayBytes)
	if p.NewBudget == nil {
		p.NewBudget = DefaultBudget
	}
	return p
}

// changedPerHost names the first per-host field that p sets differently
// from base, or returns "".
func (p *Policy) changedPerHost(base *Policy) string {
	switch {
	case !sameFunc(p.NewBudget, base.NewBudget):
		return "NewBudget"
	case p.Breaker != base.Breaker:
		return "Breaker"
	case p.Overload != base.Overload:
		return "Overload"
	}
	return ""
}

// sameFunc reports whether f and g are the same function: Go compares
// functions only with nil, so their code pointers are compared.
func sameFunc(f, g func(string) Budget) bool {
	if f == nil || g == nil {
		return f == nil && g == nil
	}
	return reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer()
}

// policy is a validated Policy with its defaults resolved.
type policy struct {
	src            Policy // the Policy it was compiled from, inheritance applied
	maxAttempts    int
	backoff        backoff.Strategy
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	maxReplay      int64
	readBody       int64 // bytes of a response body read before RoundTrip returns; 0: none
	maxResumes     int   // resumes of a response body handed over; 0: none
	classify       func(*http.Request, *http.Response, error) Class
	prepareRetry   func(Attempt, *http.Request) error
	keysOff        bool
	keyMethods     []string
	keyHeader      string
	newKey         func() string
	quoted         bool
	attemptHeader  string
	newBudget      func(string) Budget
	breaker        *BreakerPolicy  // nil: no breaker
	overload       *OverloadPolicy // nil: no overload control
	hedgeDelay     time.Duration   // the fixed delay, or the adaptive delay's fallback; 0: none
	adaptive       *adaptiveHedge  // nil: the fixed delay only
	maxHedges      int
	hints          HintPolicy
	unbudgeted     atomic.Bool    // NewBudget returned NoBudget's budget
	hedge          bool           // the policy sends hedges, now or once its host's latency is learnt
	lean           bool           // no breaker, overload control or hedging: state only for a budget
	pace           pacer.Hints    // how the pacer reads hints
	endpoints      []endpointSpec // Endpoints, parsed; nil: no failover
}

// compile resolves the defaults of p, which must have passed check.
func compile(p Policy) *policy {
	c := &policy{
		src:            p,
		maxAttempts:    cmp.Or(p.MaxAttempts, defaultMaxAttempts),
		backoff:        p.Backoff,
		attemptTimeout: max(p.AttemptTimeout, 0),
		maxRetryAfter:  cmp.Or(p.MaxRetryAfter, defaultMaxRetryAfter),
		maxReplay:      cmp.Or(p.MaxReplayBytes, defaultMaxReplayBytes),
		readBody:       max(p.ReadBodyBytes, 0),
		maxResumes:     max(cmp.Or(p.MaxResumes, cmp.Or(p.MaxAttempts, defaultMaxAttempts)-1), 0),
		classify:       p.Classify,
		prepareRetry:   p.PrepareRetry,
		keysOff:        p.Keys.Disabled,
		keyMethods:     []string{http.MethodPost, http.MethodPut},
		keyHeader:      http.CanonicalHeaderKey(cmp.Or(p.Keys.Header, "Idempotency-Key")),
		newKey:         p.Keys.New,
		quoted:         p.Keys.Quoted,
		attemptHeader:  http.CanonicalHeaderKey(p.AttemptHeader),
		newBudget:      p.NewBudget,
		hints:          p.Hints,
	}
	// Canonical header names, so that reading them from every response,
	// as pacing does, does not allocate.
	c.hints.ResetHeader = http.CanonicalHeaderKey(c.hints.ResetHeader)
	c.hints.RemainingHeader = http.CanonicalHeaderKey(c.hints.RemainingHeader)
	c.pace = pacer.Hints{IgnoreRateLimit: c.hints.IgnoreRateLimit, RemainingHeader: c.hints.RemainingHeader,
		ResetHeader: c.hints.ResetHeader}
	if c.backoff == nil {
		c.backoff = backoff.Default()
	}
	if c.newKey == nil {
		c.newKey = newUUID
	}
	if p.Keys.Methods != nil {
		c.keyMethods = make([]string, len(p.Keys.Methods))
		for i, m := range p.Keys.Methods {
			c.keyMethods[i] = strings.ToUpper(m)
		}
	}
	if p.Breaker.enabled() {
		b := p.Breaker
		c.breaker = &b
	}
	if p.Overload.on() {
		o := p.Overload
		c.overload = &o
	}
	if h := p.Hedge; !h.Disabled && (h.Delay > 0 || h.Adaptive) && c.maxAttempts > 1 {
		c.hedgeDelay = h.Delay
		c.maxHedges = min(cmp.Or(h.MaxHedges, 1), c.maxAttempts-1)
		if h.Adaptive {
			c.adaptive = &adaptiveHedge{
				q:          cmp.Or(h.Quantile, defaultHedgeQuantile),
				minSamples: cmp.Or(h.MinSamples, defaultHedgeMinSamples),
				minDelay:   h.MinDelay,
				maxDelay:   h.MaxDelay,
			}
		}
	}
	for _, e := range p.Endpoints {
		if host, port, err := hostkey.Split(e); err == nil {
			c.endpoints = append(c.endpoints, newEndpointSpec(host, port))
		}
	}
	c.hedge = c.hedgeDelay > 0 || c.adaptive != nil
	c.lean = c.breaker == nil && c.overload == nil && !c.hedge
	return c
}

// KeyPolicy configures idempotency keys. A key is generated once per
// RoundTrip and sent, unchanged, on every attempt and hedge; a key the
// caller set is never replaced. In Hosts and WithPolicy, a zero KeyPolicy
// inherits and a non-zero one replaces the inherited one as a whole.
//
// A key prevents a second application only on a server that deduplicates
// by it, under Header (Stripe and Adyen by Idempotency-Key, PayPal by
// PayPal-Request-Id). Elsewhere (S3, Azure Storage, Google Cloud Storage,
// GitHub) it only makes a POST that may have been applied retryable: set
// Disabled for those hosts.
type KeyPolicy struct {
	// Disabled turns key injection off. Requests that carry a key of their
	// own are still treated as replayable.
	Disabled bool

	// Methods lists the methods that get a key. Nil means POST and PUT.
	Methods []string

	// Header names the header. "" means Idempotency-Key. Requests carrying
	// this header, Idempotency-Key or X-Idempotency-Key count as keyed,
	// everywhere: for replay, hedging, and a 409 being transient.
	Header string

	// New returns a fresh key. Nil means a random UUIDv4. It is called from
	// many goroutines at once. An empty key, or one with control
	// characters, fails the request with ErrInvalidPolicy.
	New func() string

	// Quoted sends the key as a structured-field string ("…"), as the IETF
	// draft specifies, instead of the bare token most APIs expect.
	Quoted bool
}

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
	// closed, in ten sliding steps. 0 means 10 s; more than 24 h is
	// invalid.
	Window time.Duration

	// OpenFor is how long the breaker stays open before it lets trial
	// attempts through. 0 means 5 s; more than 24 h is invalid.
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
	// maxBreakerDuration bounds Window and OpenFor: gobreaker computes
	// instants that far ahead, which overflow past about 2,000,000 h.
	maxBreakerDuration = 24 * time.Hour
)

func (b BreakerPolicy) enabled() bool {
	return !b.Disabled && (b.ConsecutiveFailures > 0 || b.FailureRatio > 0)
}

// HedgePolicy configures hedged requests: when an attempt has not answered
// after a delay, another is sent alongside it, and the first acceptable
// answer (one that would not be retried) wins. The others are cancelled and
// their bodies closed. Hedging trades extra load for lower tail latency, so
// it applies only to requests that are safe to send twice (idempotent
// methods or keyed requests, with a replayable body). Every hedge carries
// the same idempotency key and its own body, counts toward MaxAttempts, and
// is admitted by the breaker like a retry.
//
// The delay is fixed (Delay) or learned per host (Adaptive): the host's
// Quantile of first-attempt latency, but never less than twice its median,
// over its last 512 to 1,024 requests. Either way, a host's hedges are
// capped by its hedge budget, however slow it gets: each request that may
// be hedged earns 4 % of a hedge, and the budget holds at most 4, so that
// hedges add at most 5 % to the 400 requests of a 10 s brownout instead of
// doubling them. A hedge on time may not take the budget's last hedge: an
// attempt still unanswered at twice the delay may. Hedges are not charged
// to the retry budget, and a hedge that wins is not refunded.
//
// The zero value sends no hedges. In Hosts and WithPolicy, a zero
// HedgePolicy inherits and a non-zero one replaces the inherited one as a
// whole.
type HedgePolicy struct {
	// Delay is how long an attempt may go unanswered before a hedge is
	// sent. With Adaptive, it is the delay used until the host has
	// MinSamples samples; 0 then means no hedging until then. Without
	// Adaptive, 0 means no hedging. A negative value is invalid.
	Delay time.Duration

	// Adaptive learns the delay from the host's latency: its Quantile of
	// the first attempts of its last 512 to 1,024 requests sent with an
	// adaptive policy, but never less than twice their median, bounded by
	// MinDelay and MaxDelay. The latency is per host and shared by every
	// adaptive policy that reaches it; Quantile, MinSamples, MinDelay and
	// MaxDelay are read per request. false means the fixed Delay.
	Adaptive bool

	// Quantile is the latency quantile after which an adaptive hedge is
	// sent: on a host whose latency is steady, about 1 − Quantile of
	// requests are hedged (fewer when twice the median is the larger).
	// 0 means 0.95; otherwise it must be in (0, 1). Adaptive only.
	Quantile float64

	// MinSamples is how many samples a host needs before its adaptive
	// delay applies. 0 means 100. A negative value is invalid. Adaptive
	// only.
	MinSamples int

	// MinDelay and MaxDelay bound the adaptive delay. 0 means no bound. A
	// negative value is invalid, as is a MinDelay above a MaxDelay.
	// Adaptive only; they do not bound the fallback Delay.
	MinDelay, MaxDelay time.Duration

	// MaxHedges is the most attempts sent alongside the first of a round.
	// 0 means 1. It is bounded by MaxAttempts − 1. A negative value is
	// invalid.
	MaxHedges int

	// Disabled means no hedging, even where the policy would inherit it.
	Disabled bool
}

// Defaults of the adaptive hedge delay.
const (
	defaultHedgeQuantile   = 0.95
	defaultHedgeMinSamples = 100
)

// adaptiveHedge is the compiled adaptive part of a HedgePolicy.
type adaptiveHedge struct {
	q                  float64
	minSamples         int
	minDelay, maxDelay time.Duration
}

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
	// or until its body is read when ReadBodyBytes reads it ahead, not while
	// the caller reads the body. Attempts over the limit wait in
	// a FIFO waiting room (see LimitQueue). It suits any host that queues
	// work; one path that normally takes more than half its timeout on a
	// host shared with fast paths reads as slow. false means off.
	Limit bool

	// LimitMax is the limit a host starts from and grows back to. 0 means
	// 1000 (Envoy's adaptive-concurrency ceiling). Negative is invalid; a
	// limit above 2^53 behaves as 2^53.
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
	// further away. A reset at most a second away while the host accepts
	// requests (a token bucket's Retry-After: 1) holds nothing: the host's
	// throttles set a rate instead, which attempts then keep to (see
	// docs/overload.md). It suits an API with one quota per client, as
	// GitHub's and Stripe's are; a host that keeps a quota per endpoint
	// would have every endpoint wait for one's reset. false means off.
	Pace bool

	// PaceFailFast refuses an attempt with ErrRateLimited at once while the
	// announced quota is spent, instead of waiting for its reset (what
	// go-github does). false means wait.
	PaceFailFast bool

	// Quota declares the host's rate limit, as the API documents it (say
	// Stripe's 100 requests a second per account): attempts are sent at
	// that rate at most, and pacing is on (see Pace), tightened by what the
	// host announces. With Transport.Fleet, the quota is the fleet's, shared
	// by every process. The zero value declares none.
	Quota Quota

	// Disabled turns every control off, even where the policy would
	// inherit them.
	Disabled bool
}

// Quota is a rate limit a policy declares (OverloadPolicy.Quota): Limit
// requests per Per, Burst of them at once. The Transport paces attempts
// by it with GCRA (the generic cell rate algorithm: a token bucket that
// keeps one timestamp), so that a host that enforces the same limit sees
// no attempt over it. The zero value declares none.
type Quota struct {
	// Limit is how many requests are allowed per Per. 0 means no quota;
	// negative is invalid.
	Limit int

	// Per is the period Limit is counted over: a second, a minute, an
	// hour. 0 means a second; negative is invalid.
	Per time.Duration

	// Burst is how many requests may go at once, beyond the steady rate.
	// 0 means 1: attempts are spaced evenly. Negative, or above Limit, is
	// invalid.
	Burst int

	// Key names the quota when several hosts share it, as one account's
	// quota covers an API's several host names: every host whose policy
	// declares a quota with the same Key shares one rate, one cool-down,
	// and, with Transport.Fleet, one in the fleet. "" means the host's own.
	Key string
}

// rate is the quota's rate per second, 0 for none.
func (q *Quota) rate() float64 {
	if q.Limit <= 0 {
		return 0
	}
	return float64(q.Limit) / cmp.Or(q.Per, time.Second).Seconds()
}

// Defaults of OverloadPolicy.
const (
	defaultThrottleK      = 2
	defaultThrottleWindow = 10 * time.Second
	defaultLimitMax       = 1000
)

// on reports whether any control is on.
func (o *OverloadPolicy) on() bool {
	return !o.Disabled && (o.Throttle || o.Limit || o.Pace || o.Quota.Limit > 0)
}

// HintPolicy configures the server hints a Transport reads from responses,
// beyond Retry-After. In Hosts and WithPolicy, a zero HintPolicy inherits
// and a non-zero one replaces the inherited one as a whole.
//
// Precedence. Whether to retry: Policy.Classify, then the should-retry
// header, then the built-in classification. When to retry: Retry-After,
// then the rate-limit hints (RateLimit, then ResetHeader), then the backoff
// strategy. Retry-After comes first because the RateLimit draft says so when
// both are present. A server-requested wait, whatever its source, is never
// shortened, is jittered only upward, and ends retrying when it exceeds
// MaxRetryAfter or the context's deadline.
type HintPolicy struct {
	// ShouldRetryHeader names a response header whose value "true" or
	// "false" overrides the classification of a failed response (a status
	// of 400 or more; on a success it is ignored), as Stripe's
	// Stripe-Should-Retry does. "true" means the server vouches that sending
	// the request again is safe, whatever its method; "false" means do not
	// retry. Other values are ignored. "" means no such header.
	ShouldRetryHeader string

	// IgnoreRateLimit turns off reading the wait from the RateLimit header
	// field of the IETF draft (RateLimit: "default";r=0;t=30: t seconds
	// until the quota resets) on responses that are retried anyway.
	IgnoreRateLimit bool

	// ResetHeader names a legacy header that says when a rate limit resets,
	// such as X-RateLimit-Reset, read on responses that are retried anyway.
	// APIs count it two ways, and no value means both: below 10⁸ (3 years)
	// it is seconds from now; from 10⁸ on (1973) it is the reset's Unix time
	// in seconds (GitHub, X), and a reset in the past means now. "" means
	// none.
	ResetHeader string

	// RemainingHeader names a legacy header that counts the requests left
	// before ResetHeader's reset, such as X-RateLimit-Remaining (GitHub,
	// Stripe). It is read with ResetHeader, which must be set too, and only
	// to pace requests (OverloadPolicy.Pace): while a response carrying
	// both says requests are left, attempts go out as long as fewer than
	// that many are in flight; once it says none are, they wait for the
	// reset (see docs/overload.md). "" means none.
	RemainingHeader string
}

// overridesKey is the context key of the per-request policy edits.
type overridesKey struct{}

// overrides is the list of edits a context carries, oldest first.
type overrides []func(*Policy)

// WithPolicy returns a copy of ctx whose requests, sent through a
// Transport, use the policy that would apply to them (after the Hosts
// lookup) as edited by f. f receives a copy of that policy with
// MaxAttempts, Backoff, MaxRetryAfter, MaxReplayBytes and NewBudget filled
// in with the values that apply, and edits it in place; a field it sets to
// zero then means the package default. Several calls compose in order: the
// function of the innermost context runs last. A nil f adds nothing.
//
// Because it travels in the request's context, WithPolicy reaches through
// any SDK that takes a context.Context. Per-host state stays per host: a
// call cannot change NewBudget, Breaker or Overload, and its retries are
// charged to the host's budget like any other. An edit that makes the policy invalid,
// or changes a per-host setting, fails the request with ErrInvalidPolicy.
func WithPolicy(ctx context.Context, f func(p *Policy)) context.Context {
	if f == nil {
		return ctx
	}
	prev, _ := ctx.Value(overridesKey{}).(overrides)
	next := make(overrides, len(prev), len(prev)+1)
	copy(next, prev)
	return context.WithValue(ctx, overridesKey{}, append(next, f))
}

// WithoutRetries returns a copy of ctx whose requests, sent through a
// Transport, get exactly one attempt: no retry and no hedge. Everything
// else about the policy (idempotency keys, the breaker, logging) still
// applies. It composes with WithPolicy like any other edit.
func WithoutRetries(ctx context.Context) context.Context {
	return WithPolicy(ctx, withoutRetries)
}

func withoutRetries(p *Policy) {
	p.MaxAttempts = 1
	p.MaxResumes = -1
	p.Hedge = HedgePolicy{}
}

// override returns p as edited by fs, compiled for one request.
func (p *policy) override(fs overrides) (*policy, error) {
	base := p.src.resolved()
	edited := base
	edited.Endpoints = slices.Clone(base.Endpoints) // the functions may edit it in place
	for _, f := range fs {
		f(&edited)
	}
	resolved := edited.resolved() // a per-host field set to zero means its default, as at the host
	if field := resolved.changedPerHost(&base); field != "" {
		return nil, invalidf([]string{"WithPolicy", field}, "is per host and cannot be changed per request")
	}
	errs := edited.check([]string{"WithPolicy"})
	errs = append(errs, edited.checkEndpointsWithin(base.Endpoints)...)
	if err := edited.checkMerged([]string{"WithPolicy"}); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, joinUnique(errs)
	}
	return compile(edited), nil
}
