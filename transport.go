package httpretry

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// Transport is an http.RoundTripper that retries transient failures.
//
// The zero value is usable: it retries with the default Policy over a pooled
// transport of its own. A Transport is safe for concurrent use. Its fields
// are read once, at its first use (RoundTrip, Validate, Stats or
// CloseIdleConnections): set them all before, and do not change them
// after. Most callers want one Transport per process, set as the Transport
// of an http.Client, and a call to Validate at start-up, after the fields
// are set.
type Transport struct {
	// Base sends each attempt. Nil means a pooled transport from
	// go-cleanhttp, created once for this Transport. Layers that must run
	// once per attempt (request signing, auth, tracing) belong in Base.
	Base http.RoundTripper

	// Policy applies to requests that no key of Hosts matches, and is
	// what every entry of Hosts inherits.
	Policy Policy

	// Hosts holds policies per host and per endpoint. A key is a host
	// pattern — "host", "host:port" or "*.suffix" (any subdomain of suffix,
	// at any depth, but not suffix itself) — optionally followed by a path
	// prefix: "api.example.com/v1/search" applies to /v1/search and
	// everything below it, not to /v1/searches.
	//
	// The host chooses first, the most specific pattern first: "host:port",
	// then "host", then the wildcard with the longest suffix (one with a port
	// before one without). Within the first pattern that has a key matching
	// the request's path, the longest path prefix wins; the key without a
	// path matches every path. Keys are case-insensitive in the host and
	// case-sensitive in the path; a URL without a port matches "host:port"
	// keys with the scheme's default port.
	//
	// An entry inherits every field it leaves zero from the policy its host
	// would get without it: a key with a path from its host's entry, a host's
	// entry from Policy, Policy from the package defaults. Per-host settings
	// (NewBudget, Breaker, Overload) belong to keys without a path. An
	// invalid key or policy fails every request with ErrInvalidPolicy;
	// Validate lists them.
	Hosts map[string]Policy

	// Logger, if non-nil, receives one record per attempt: Debug for an
	// attempt that succeeds or a hedge that lost to a faster one, Info for
	// one that is retried, Warn for a failure that ends retrying; and a
	// Warn record for a retry or first attempt that was not sent (an
	// overload control, the breaker or PrepareRetry refused it). Nil means
	// silent. Records never carry userinfo, query values or header values,
	// not even inside error text.
	Logger *slog.Logger

	// OnAttempt, if non-nil, is called once for each attempt Base saw,
	// hedges included, with the decision taken about it, before any wait.
	// It runs on the RoundTrip goroutine and must not read or close the
	// response body or modify the request.
	OnAttempt func(Attempt)

	// OnCall, if non-nil, is called once per RoundTrip, just before it
	// returns, with a summary of the call: what was returned, how many
	// attempts it took, how long, and why it stopped. It also reports calls
	// that sent nothing, such as those an open breaker or an overload
	// control refused (Call.Stop says which). It runs on
	// the RoundTrip goroutine and must not read or close the response body.
	OnCall func(Call)

	once     sync.Once
	base     http.RoundTripper
	hosts    *hostTable
	states   hostStates
	creating sync.Mutex // held while a host's state is created
}

// Call describes one RoundTrip once it has ended, for Transport.OnCall.
type Call struct {
	Host     string         // the host's key, as Attempt.Host; "" for an invalid request
	Request  *http.Request  // the caller's request
	Response *http.Response // what RoundTrip returns; nil when Err is set
	Err      error          // what RoundTrip returns; nil when Response is set
	Attempts int            // attempts Base saw, hedges included
	Hedges   int            // attempts sent as hedges
	Duration time.Duration  // from the start of RoundTrip until it returned
	Stop     StopReason     // why the call stopped
}

func (t *Transport) init() {
	t.once.Do(func() {
		t.base = t.Base
		if t.base == nil {
			t.base = cleanhttp.DefaultPooledTransport()
		}
		t.hosts = compileHosts(t.Policy, t.Hosts)
	})
}

// CloseIdleConnections closes the idle connections of Base, if Base has
// such a method. Only an explicit call closes them: RoundTrip never does.
func (t *Transport) CloseIdleConnections() {
	t.init()
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req and retries transient failures as its Policy allows.
// It returns the last response, untouched, when one was received, even if
// it is a failure such as a 503 after the last attempt; otherwise a
// *RetryError (see RetryError for the one exception). It never modifies
// req and always closes req.Body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	c := &callState{t: t, req: req, timed: t.OnAttempt != nil || t.OnCall != nil || t.Logger != nil}
	if c.timed {
		c.began = time.Now()
	}
	resp, err := c.roundTrip()
	if t.OnCall != nil {
		var d time.Duration
		if !c.began.IsZero() {
			d = time.Since(c.began)
		}
		t.OnCall(Call{Host: c.host, Request: req, Response: resp, Err: err,
			Attempts: c.sent, Hedges: c.hedges, Duration: d, Stop: c.stop})
	}
	return resp, err
}
