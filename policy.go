package httpretry

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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

	// AttemptTimeout bounds each attempt, from sending the request until
	// the response body is closed. It never shortens the caller's context.
	// An attempt that times out is retried like any transient failure.
	// 0 means no per-attempt limit.
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
	// must not read or close resp.Body.
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

// hostTable selects the policy for a request's host. Lookup order, most
// specific first: an exact "host:port" key; an exact "host" key; the
// "*.suffix" key with the longest suffix, a key with a port before one
// without; Transport.Policy.
type hostTable struct {
	exact    map[string]*policy // "host" and "host:port", lower-case, IPv6 without brackets for "host"
	wild     []wildcard         // longest suffix first
	fallback *policy
	err      error
}

type wildcard struct {
	suffix string // ".example.com"
	port   string // "" for any port
	p      *policy
}

func compileHosts(def Policy, hosts map[string]Policy) *hostTable {
	t := &hostTable{}
	var errs []error
	var err error
	if t.fallback, err = compilePolicy("", def); err != nil {
		errs = append(errs, err)
	}
	for _, key := range slices.Sorted(maps.Keys(hosts)) {
		p, err := compilePolicy(key, hosts[key])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := t.add(key, p); err != nil {
			errs = append(errs, err)
		}
	}
	slices.SortStableFunc(t.wild, func(a, b wildcard) int {
		if d := len(b.suffix) - len(a.suffix); d != 0 {
			return d
		}
		return len(b.port) - len(a.port)
	})
	t.err = errors.Join(errs...)
	return t
}

func (t *hostTable) add(key string, p *policy) error {
	host, port, err := splitPattern(key)
	if err != nil {
		return fmt.Errorf("%w: Hosts[%q]: %v", ErrInvalidPolicy, key, err)
	}
	if suffix, ok := strings.CutPrefix(host, "*"); ok {
		t.wild = append(t.wild, wildcard{suffix: suffix, port: port, p: p})
		return nil
	}
	if t.exact == nil {
		t.exact = make(map[string]*policy)
	}
	k := host
	if port != "" {
		k = net.JoinHostPort(host, port)
	}
	if _, dup := t.exact[k]; dup {
		return fmt.Errorf("%w: Hosts[%q]: same host as another key", ErrInvalidPolicy, key)
	}
	t.exact[k] = p
	return nil
}

// splitPattern validates a Hosts key and returns its lower-case host (with
// a leading "*" for a wildcard, IPv6 without brackets) and port.
func splitPattern(key string) (host, port string, err error) {
	if key == "" {
		return "", "", errors.New("empty host pattern")
	}
	if strings.ContainsAny(key, "/?#@ \t") {
		return "", "", errors.New(`a host pattern is "host", "host:port" or "*.suffix", not a URL`)
	}
	host = strings.ToLower(key)
	if strings.HasPrefix(host, "[") || strings.Count(host, ":") == 1 {
		h, p, err := net.SplitHostPort(host)
		if err != nil {
			return "", "", err
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
			return "", "", fmt.Errorf("bad port %q", p)
		}
		host, port = h, p
	}
	name := strings.TrimPrefix(host, "*.")
	switch {
	case host == "*":
		return "", "", errors.New(`"*" matches every host: set Transport.Policy instead`)
	case strings.Contains(name, "*"):
		return "", "", errors.New(`a wildcard must be a leading "*." followed by a domain`)
	case name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return "", "", fmt.Errorf("bad host name %q", name)
	}
	if strings.HasPrefix(host, "*.") {
		host = "*." + name
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == ':') {
			return "", "", fmt.Errorf("bad character %q in host name", r)
		}
	}
	return host, port, nil
}

// lookup returns the policy for u's host.
func (t *hostTable) lookup(u *url.URL) *policy {
	if len(t.exact) == 0 && len(t.wild) == 0 {
		return t.fallback
	}
	hostport := strings.ToLower(u.Host)
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		port = defaultPort(u.Scheme)
		hostport = net.JoinHostPort(host, port)
	}
	if len(t.exact) > 0 {
		if p, ok := t.exact[hostport]; ok {
			return p
		}
		if p, ok := t.exact[host]; ok {
			return p
		}
	}
	for _, w := range t.wild {
		if strings.HasSuffix(host, w.suffix) && (w.port == "" || w.port == port) {
			return w.p
		}
	}
	return t.fallback
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
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
