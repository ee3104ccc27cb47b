package httpretry

import (
	"cmp"
	"net/http"
	"reflect"
	"strings"
	"time"

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
	// its response header arrives. The attempt's context then lives until
	// the response body is closed, so a slow body still streams in full. It
	// never shortens the caller's context. An attempt that times out is
	// retried like any transient failure. 0 means no per-attempt limit (or
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

	// Classify, if non-nil, classifies each attempt's outcome before the
	// built-in rules (see the package-level Classify function); returning
	// ClassDefault falls back to them. req is the attempt's request, with
	// its idempotency key. Exactly one of resp and err is non-nil; Classify
	// must not read or close resp.Body. It is called from many goroutines
	// at once (hedged attempts included).
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
	// or PUT safe. The zero value adds a bare UUIDv4 to POST and PUT.
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
}

// Defaults applied when a Policy field is zero.
const (
	DefaultMaxAttempts    = 4
	DefaultMaxRetryAfter  = 60 * time.Second
	DefaultMaxReplayBytes = 1 << 20
)

// perHostFields are the Policy fields that configure per-host state. They
// are set per host: a path key or a per-request override cannot change
// them, so that every request to a host shares one budget, one breaker and
// one set of overload controls.
var perHostFields = []string{"NewBudget", "Breaker", "Overload"}

// inherit returns p with every field it leaves zero taken from parent.
// Sub-policies are taken as a whole.
func (p Policy) inherit(parent Policy) Policy {
	inheritZero(&p, parent)
	return p
}

// inheritZero sets every field of the struct *dst that is zero to that
// field of parent, a value of the same struct type.
func inheritZero[T any](dst *T, parent T) {
	c, pv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(parent)
	for i := range c.NumField() {
		if c.Field(i).IsZero() {
			c.Field(i).Set(pv.Field(i))
		}
	}
}

// resolved returns p with the defaults of its scalar settings filled in,
// as WithPolicy's functions see it.
func (p Policy) resolved() Policy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultMaxAttempts)
	if p.Backoff == nil {
		p.Backoff = backoff.Default()
	}
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, DefaultMaxRetryAfter)
	p.MaxReplayBytes = cmp.Or(p.MaxReplayBytes, DefaultMaxReplayBytes)
	if p.NewBudget == nil {
		p.NewBudget = DefaultBudget
	}
	return p
}

// changedPerHost names the first per-host field that p sets differently
// from base, or returns "".
func (p *Policy) changedPerHost(base *Policy) string {
	a, b := reflect.ValueOf(p).Elem(), reflect.ValueOf(base).Elem()
	for _, name := range perHostFields {
		x, y := a.FieldByName(name), b.FieldByName(name)
		same := false
		if x.Kind() == reflect.Func {
			same = x.IsNil() == y.IsNil() && (x.IsNil() || x.Pointer() == y.Pointer())
		} else {
			same = reflect.DeepEqual(x.Interface(), y.Interface())
		}
		if !same {
			return name
		}
	}
	return ""
}

// policy is a validated Policy with its defaults resolved.
type policy struct {
	src            Policy // the Policy it was compiled from, inheritance applied
	maxAttempts    int
	backoff        backoff.Strategy
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	maxReplay      int64
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
}

// compile resolves the defaults of p, which must have passed check.
func compile(p Policy) *policy {
	c := &policy{
		src:            p,
		maxAttempts:    cmp.Or(p.MaxAttempts, DefaultMaxAttempts),
		backoff:        p.Backoff,
		attemptTimeout: max(p.AttemptTimeout, 0),
		maxRetryAfter:  cmp.Or(p.MaxRetryAfter, DefaultMaxRetryAfter),
		maxReplay:      cmp.Or(p.MaxReplayBytes, DefaultMaxReplayBytes),
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
	if c.backoff == nil {
		c.backoff = backoff.Default()
	}
	if c.newBudget == nil {
		c.newBudget = DefaultBudget
	}
	if isNoBudget(c.newBudget) {
		c.newBudget = nil
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
				q:          cmp.Or(h.Quantile, DefaultHedgeQuantile),
				minSamples: cmp.Or(h.MinSamples, DefaultHedgeMinSamples),
				minDelay:   h.MinDelay,
				maxDelay:   h.MaxDelay,
			}
		}
	}
	return c
}

// stateful reports whether the policy keeps state per host.
func (p *policy) stateful() bool {
	return p.newBudget != nil || p.breaker != nil || p.overload != nil || p.hedges()
}

// hedges reports whether the policy sends hedges, now or once its host's
// latency is learnt.
func (p *policy) hedges() bool {
	return p.hedgeDelay > 0 || p.adaptive != nil
}

// isNoBudget reports whether f is NoBudget.
func isNoBudget(f func(string) Budget) bool {
	return reflect.ValueOf(f).Pointer() == reflect.ValueOf(NoBudget).Pointer()
}
