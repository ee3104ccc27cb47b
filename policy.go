package httpretry

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/seedhq/httpretry/backoff"
)

// Policy says when and how to retry. The zero Policy is the default policy:
// 4 attempts, exponential full-jitter backoff from 100 ms capped at 3 s,
// Retry-After obeyed up to 60 s, bodies without GetBody buffered up to 1 MiB,
// an Idempotency-Key on POST and PUT. Defaults are resolved when the policy
// is used; the fields are never written.
type Policy struct {
	// MaxAttempts counts tries including the first. 0 means 4; 1 disables
	// retries. A negative value is invalid.
	MaxAttempts int

	// Backoff computes the wait before each retry. Nil means
	// backoff.Default(): exponential, full jitter, base 100 ms, cap 3 s.
	// A strategy with a Validate() error method is validated once.
	Backoff backoff.Strategy

	// AttemptTimeout bounds each attempt from sending the request until
	// its response header arrives. The attempt's context then lives until
	// the response body is closed, so a slow body still streams in full. It
	// never shortens the caller's context. An attempt that times out is
	// retried like any transient failure. 0 means no per-attempt limit.
	AttemptTimeout time.Duration

	// MaxRetryAfter is the longest server-requested wait obeyed. A response
	// asking for more (Retry-After or a rate-limit hint) ends retrying and is
	// returned to the caller at once. 0 means 60 s.
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

	// Keys configures the Idempotency-Key header that makes retrying a POST
	// or PUT safe. The zero value adds a bare UUIDv4 to POST and PUT.
	Keys KeyPolicy

	// AttemptHeader, if set, names a request header that carries the attempt
	// number (1 for the first) on every attempt, so a server can see retries
	// and shed them first (like Envoy's x-envoy-attempt-count). "" means no
	// such header.
	AttemptHeader string

	// NewBudget creates the retry budget of one host; the Transport calls it
	// once for each host it sends to under this policy, keyed by
	// "host:port" with the scheme's default port folded away (https://h,
	// https://h:443 and http://h share one), so one failing host never
	// spends another's budget. Nil means DefaultBudget, a
	// token bucket that is invisible while failures are rare and stops
	// retries under sustained failure. NoBudget turns budgeting off.
	NewBudget func() Budget

	// Breaker, if non-nil, puts a circuit breaker in front of each host
	// ("host:port"), built from these settings with sony/gobreaker. It is
	// consulted before every attempt; while it is open, RoundTrip fails fast
	// with an error that errors.Is ErrCircuitOpen: no attempt, no wait, no
	// budget charge. Transient and not-processed failures and fatal errors
	// without a response count as failures; any response the server meant
	// to send counts as a success; the caller's cancellation is not counted.
	// Name defaults to the host; IsSuccessful is replaced by those rules and
	// IsExcluded is kept. OnStateChange runs under the breaker's lock: it
	// must not block or call back into the Transport. Nil means no breaker.
	Breaker *gobreaker.Settings

	// Hedge configures hedged attempts for requests that are safe to send
	// twice. The zero value sends none.
	Hedge HedgePolicy

	// Hints configures the server hints read besides Retry-After: a
	// should-retry header, the RateLimit header field, a legacy reset
	// header. The zero value reads the RateLimit field only.
	Hints HintPolicy
}

// KeyPolicy configures idempotency keys. A key is generated once per
// RoundTrip and sent, unchanged, on every attempt; a key the caller set is
// never replaced.
type KeyPolicy struct {
	// Disabled turns key injection off. Requests that carry a key of their
	// own are still treated as replayable.
	Disabled bool

	// Methods lists the methods that get a key. Nil means POST and PUT.
	Methods []string

	// Header names the header. "" means Idempotency-Key. Requests carrying
	// this header, Idempotency-Key or X-Idempotency-Key count as keyed.
	Header string

	// New returns a fresh key. Nil means a random UUIDv4. It is called from
	// many goroutines at once.
	New func() string

	// Quoted sends the key as a structured-field string ("…"), as the IETF
	// draft specifies, instead of the bare token most APIs expect.
	Quoted bool
}

// Defaults applied when a Policy field is zero.
const (
	DefaultMaxAttempts    = 4
	DefaultMaxRetryAfter  = 60 * time.Second
	DefaultMaxReplayBytes = 1 << 20
)

// policy is a validated Policy with its defaults resolved.
type policy struct {
	pattern        string // the Hosts key it came from, "" for Transport.Policy
	maxAttempts    int
	backoff        backoff.Strategy
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	maxReplay      int64
	classify       func(*http.Request, *http.Response, error) Class
	keysOff        bool
	keyMethods     []string
	keyHeader      string
	newKey         func() string
	quoted         bool
	attemptHeader  string
	newBudget      func() Budget
	breaker        *gobreaker.Settings
	hedgeDelay     time.Duration
	maxHedges      int
	hints          HintPolicy
}

func compilePolicy(pattern string, p Policy) (*policy, error) {
	where := "Transport.Policy"
	if pattern != "" {
		where = fmt.Sprintf("Hosts[%q]", pattern)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, where, fmt.Sprintf(format, args...))
	}
	switch {
	case p.MaxAttempts < 0:
		return nil, bad("MaxAttempts %d is negative", p.MaxAttempts)
	case p.Hedge.Delay < 0:
		return nil, bad("Hedge.Delay %v is negative", p.Hedge.Delay)
	case p.Hedge.MaxHedges < 0:
		return nil, bad("Hedge.MaxHedges %d is negative", p.Hedge.MaxHedges)
	case p.AttemptTimeout < 0:
		return nil, bad("AttemptTimeout %v is negative", p.AttemptTimeout)
	case p.MaxRetryAfter < 0:
		return nil, bad("MaxRetryAfter %v is negative", p.MaxRetryAfter)
	case p.AttemptHeader != "" && !validToken(p.AttemptHeader):
		return nil, bad("AttemptHeader %q is not a valid header name", p.AttemptHeader)
	case p.Hints.ShouldRetryHeader != "" && !validToken(p.Hints.ShouldRetryHeader):
		return nil, bad("Hints.ShouldRetryHeader %q is not a valid header name", p.Hints.ShouldRetryHeader)
	case p.Hints.ResetHeader != "" && !validToken(p.Hints.ResetHeader):
		return nil, bad("Hints.ResetHeader %q is not a valid header name", p.Hints.ResetHeader)
	case p.Hints.ResetFormat != ResetDeltaSeconds && p.Hints.ResetFormat != ResetEpochSeconds:
		return nil, bad("Hints.ResetFormat %d is not a known format", p.Hints.ResetFormat)
	case p.Keys.Header != "" && !validToken(p.Keys.Header):
		return nil, bad("Keys.Header %q is not a valid header name", p.Keys.Header)
	}
	if v, ok := p.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, bad("Backoff: %v", err)
		}
	}
	c := &policy{
		pattern:        pattern,
		maxAttempts:    cmpOr(p.MaxAttempts, DefaultMaxAttempts),
		backoff:        p.Backoff,
		attemptTimeout: p.AttemptTimeout,
		maxRetryAfter:  cmpOr(p.MaxRetryAfter, DefaultMaxRetryAfter),
		maxReplay:      cmpOr(p.MaxReplayBytes, DefaultMaxReplayBytes),
		classify:       p.Classify,
		keysOff:        p.Keys.Disabled,
		keyMethods:     []string{http.MethodPost, http.MethodPut},
		keyHeader:      http.CanonicalHeaderKey(cmpOr(p.Keys.Header, "Idempotency-Key")),
		newKey:         p.Keys.New,
		quoted:         p.Keys.Quoted,
		attemptHeader:  http.CanonicalHeaderKey(p.AttemptHeader),
		newBudget:      p.NewBudget,
		breaker:        p.Breaker,
		hedgeDelay:     p.Hedge.Delay,
		maxHedges:      cmpOr(p.Hedge.MaxHedges, 1),
		hints:          p.Hints,
	}
	if c.backoff == nil {
		c.backoff = backoff.Default()
	}
	if c.newBudget == nil {
		c.newBudget = DefaultBudget
	}
	if c.newKey == nil {
		c.newKey = newUUID
	}
	if p.Keys.Methods != nil {
		c.keyMethods = make([]string, 0, len(p.Keys.Methods))
		for _, m := range p.Keys.Methods {
			if !validToken(m) {
				return nil, bad("Keys.Methods: %q is not a valid method", m)
			}
			c.keyMethods = append(c.keyMethods, strings.ToUpper(m))
		}
	}
	return c, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// validToken reports whether s is an RFC 9110 token, the syntax of header
// names and methods.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
