package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry/internal/addrs"
	"github.com/seedhq/httpretry/internal/freshconn"
	"github.com/seedhq/httpretry/internal/hoststate"
	"github.com/seedhq/httpretry/internal/latency"
	"github.com/seedhq/httpretry/internal/pacer"
	"github.com/seedhq/httpretry/internal/replay"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seedhq/httpretry/backoff"
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
	//
	// When Base is an *http.Transport (the default is one) without a
	// MaxConnsPerHost, and the program is built with Go 1.26 or later, a
	// retry after a failure that leaves an HTTP/2 connection in net/http's
	// pool — a stream reset, or an attempt timeout on an https URL — is
	// sent on a connection of its own (Transport.NewClientConn), closed
	// when its response body is closed, so that it does not go back to
	// the connection that failed. Any other Base, one that wraps an
	// *http.Transport included, sends every attempt through its own pool,
	// and so does one whose HTTP/2 cannot make a connection of its own
	// (golang.org/x/net's ConfigureTransports before x/net v0.48), which
	// the Transport finds out at the first such retry, and logs once.
	//
	// With the default Base (nil), a retry after a failure that names its
	// connection's address (a reset, a refused dial, a read timeout) is
	// also sent on a connection of its own, dialled to another of the host
	// name's addresses when it has several; and for 30 s, across calls, new
	// connections try such an address after the name's others, still
	// racing the name's IPv6 and IPv4 addresses as net.Dialer does (Happy
	// Eyeballs). While all are well, dials are net.Dialer's own, in the
	// resolver's order. A Base of the caller's dials as it always has: the
	// Transport cannot choose the address another dialer dials.
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
	// case-sensitive in the path; a trailing dot in the host is dropped; a
	// URL without a port matches "host:port" keys with the scheme's default
	// port; an IPv6 address is written in brackets before a port
	// ("[::1]:8080"). Package chaos reads its Rule.Host by the same rule.
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
	// one that is retried, Warn for a failure that ends retrying (Info, with
	// stop="retries off", when the call allowed one attempt); and a
	// Warn record for a retry or first attempt that was not sent (an
	// overload control, the breaker or PrepareRetry refused it). Nil means
	// silent. Records never carry userinfo, query values or header values,
	// not even inside error text.
	Logger *slog.Logger

	// OnAttempt, if non-nil, is called once for each attempt Base saw,
	// hedges included, with the decision taken about it, before any wait.
	// It runs on the RoundTrip goroutine (for a resume, Attempt.Resume, on
	// the goroutine reading the body, after RoundTrip returned) and must
	// not read or close the response body or modify the request.
	OnAttempt func(Attempt)

	// OnCall, if non-nil, is called once per RoundTrip, just before it
	// returns, with a summary of the call: what was returned, how many
	// attempts it took, how long, and why it stopped. It also reports calls
	// that sent nothing, such as those an open breaker or an overload
	// control refused (Call.Stop says which). It runs on
	// the RoundTrip goroutine and must not read or close the response body.
	OnCall func(Call)

	// Fleet, if non-nil, shares what this Transport learns about its
	// hosts with the other processes of a fleet, and what they learn with
	// it: cool-downs, declared quotas, open breakers (see Fleet). Module
	// github.com/seedhq/httpretry/fleet provides one on Redis. Nil means
	// each process keeps its own.
	Fleet Fleet

	once   sync.Once
	base   http.RoundTripper
	fresh  atomic.Bool  // base can give a retry a connection of its own, as far as is known
	addrs  *addrs.Table // the addresses the default Base avoids; nil for a Base of the caller's
	hosts  *hostTable
	states hoststate.Table[hostPort]
	quotas sync.Map // Quota.Key → *pacer.Pacer: the pacer the hosts of one quota share
}

func (t *Transport) init() {
	t.once.Do(func() {
		t.base = t.Base
		if t.base == nil {
			t.base = t.defaultBase()
		}
		t.fresh.Store(freshconn.Supported(t.base))
		t.hosts = compileHosts(t.Policy, t.Hosts)
	})
}

// freshConns reports whether Base can give a retry a connection of its
// own, as far as the Transport knows.
func (t *Transport) freshConns() bool { return t.fresh.Load() }

// noFreshConns notes that Base, which freshconn.Supported accepted, cannot
// make a connection of its own after all (err says why: an HTTP/2
// implementation without NewClientConn, as x/net's ConfigureTransports
// registers before v0.48): every later retry goes through its pool. The
// Logger hears it once.
func (t *Transport) noFreshConns(err error) {
	if t.fresh.CompareAndSwap(true, false) && t.Logger != nil {
		t.Logger.Warn("httpretry: Base cannot give a retry a connection of its own; retries use its pool", "err", err)
	}
}

// pacerFor returns a pacer for a host whose policy declares quota q (none:
// q.Limit 0): the pacer of q.Key, shared by the hosts that name it, or one
// of the host's own.
func (t *Transport) pacerFor(q *Quota) *pacer.Pacer {
	if q.Key == "" {
		return pacer.NewDeclared(q.rate(), q.Burst)
	}
	if p, ok := t.quotas.Load(q.Key); ok {
		return p.(*pacer.Pacer)
	}
	p, _ := t.quotas.LoadOrStore(q.Key, pacer.NewDeclared(q.rate(), q.Burst))
	return p.(*pacer.Pacer)
}

// defaultBase is the Base of a Transport whose Base is nil: go-cleanhttp's
// pooled transport, dialling with its dialer's settings through one that
// prefers the addresses of a name that have not failed (internal/addrs).
func (t *Transport) defaultBase() http.RoundTripper {
	tr := cleanhttp.DefaultPooledTransport()
	t.addrs = new(addrs.Table)
	d := &addrs.Dialer{
		Dial: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		Lookup: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, network, host) // as net.Dialer reads it: at each dial
		},
		Table:   t.addrs,
		Timeout: 30 * time.Second,
	}
	tr.DialContext = d.DialContext
	return tr
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
		returned := false
		defer func() {
			if !returned && resp != nil {
				closeQuietly(resp.Body) // OnCall panicked: the response never reaches the caller
			}
		}()
		t.OnCall(Call{Host: c.host, Request: req, Response: resp, Err: err,
			Attempts: c.sent, Hedges: c.hedges, Duration: d, Stop: c.stop})
		returned = true
	}
	return resp, err
}

// callState is one RoundTrip in progress.
type callState struct {
	t        *Transport
	req      *http.Request
	p        *policy
	h        hostPort
	host     string           // h as "host:port", when observers need it
	state    *hoststate.State // nil until the host needs state
	body     *replay.Replay   // nil for a request without a body
	Key      string           // the key the Transport added; "" for none
	timed    bool             // observers want durations
	deadline bool             // the caller's context has a deadline: attempts are timed to fit the next one before it
	began    time.Time
	delay    time.Duration      // the hedge delay; 0: no hedging
	learn    *latency.Estimator // the host's latency, fed by the first attempt; nil when the call does not learn

	sent, hedges int
	lastStatus   int
	lastErr      error          // the last attempt's error
	last         Attempt        // the last attempt, for PrepareRetry
	edited       *http.Request  // the request PrepareRetry last edited, for its round's hedges
	editedEp     int            // the endpoint edited went to
	held         *http.Response // the last response, drained into memory, while its retry is not yet sent
	prevDelay    time.Duration  // the previous backoff delay, for decorrelated jitter
	failedAddrs  *addrs.Set     // addresses that failed in this call, avoided by the default Base's dials; nil until one does
	reserved     bool           // a retry's cost is taken from the budget and not yet spent
	reservedTO   bool           // ... as a timeout retry
	timeoutRetry bool           // the last retry sent was charged as a timeout retry
	fresh        bool           // the next retry is to have a connection of its own (needsFreshConn)
	stop         StopReason
	logPanic     func(any) // what abandoned returned, made once

	fo *failover // nil for a call that does not move (Policy.Endpoints)
}

// failover is the part of a call that may move to other endpoints, apart
// so that a call without Endpoints pays one pointer for it. The call's h
// and state are those of eps[cur], the endpoint of the attempt in hand.
type failover struct {
	eps        []endpoint       // nil once RoundTrip returned: a resume stays where its response came from
	buf        [3]endpoint      // eps's array, for the request's host and two endpoints
	cur        int              // the index of the call's endpoint in eps
	addr       string           // its URL host; "" for the request's own
	host       string           // its key, as Attempt.Host names it
	hp         *policy          // the policy its state is made by
	reservedIn *hoststate.State // the state whose budget the reserved retry's cost came from
}

// moving reports whether the call may send its next attempt elsewhere.
func (c *callState) moving() bool { return c.fo != nil && c.fo.eps != nil }

// endpointAddr returns the URL host of the call's endpoint when it is not
// the request's own host, else "".
func (c *callState) endpointAddr() string {
	if c.fo == nil {
		return ""
	}
	return c.fo.addr
}

// mayMove reports whether the call may send attempts to other endpoints
// than its host: it has some, and the request may be sent twice.
func (c *callState) mayMove() bool {
	return len(c.p.endpoints) > 0 && c.body.Replayable() && (c.Key != "" || c.p.replayable(c.req))
}

// moveTo makes endpoint i the call's: the host whose state the next steps
// (admission, settling, the retry's decision) use.
func (c *callState) moveTo(i int) {
	fo := c.fo
	if i == fo.cur {
		return
	}
	fo.eps[fo.cur].state = c.state
	e := &fo.eps[i]
	fo.cur, c.h, c.state, fo.addr, fo.host, fo.hp = i, e.h, e.state, e.addr, e.host, e.p
}

// statePolicy returns the policy that makes the state of the call's host.
func (c *callState) statePolicy() *policy {
	if c.fo != nil && c.fo.hp != nil {
		return c.fo.hp
	}
	return c.p
}

// abandoned returns what logs a panic of Base that no caller can reach
// any more (panicLogger's), made at most once a call; nil without a Logger.
func (c *callState) abandoned() func(any) {
	if c.t.Logger == nil {
		return nil
	}
	if c.logPanic == nil {
		c.logPanic = c.panicLogger()
	}
	return c.logPanic
}

func (c *callState) roundTrip() (*http.Response, error) {
	req := c.req
	if err := checkRequest(req, c.t.Base == nil); err != nil {
		if req != nil {
			closeBody(req.Body)
		}
		return c.fail(&RetryError{Stop: StopInvalid, Err: err})
	}
	if err := c.t.hosts.err; err != nil {
		closeBody(req.Body)
		return c.fail(&RetryError{Stop: StopInvalid, Err: err})
	}
	ctx := req.Context()
	c.h = hostOf(req.URL)
	if c.timed {
		c.host = c.h.String()
	}
	if ctx.Err() != nil {
		closeBody(req.Body)
		return c.fail((&RetryError{Stop: StopContext, Err: context.Cause(ctx)}).contextEnded(ctx))
	}
	_, c.deadline = ctx.Deadline()
	c.p = c.t.hosts.lookup(c.h, req.URL.Path)
	if fs := overridesFrom(ctx); fs != nil {
		p, err := c.p.override(fs)
		if err != nil {
			closeBody(req.Body)
			return c.fail(&RetryError{Stop: StopInvalid, Err: err})
		}
		c.p = p
	}
	if c.host == "" && c.p.prepareRetry != nil {
		c.host = c.h.String() // PrepareRetry sees Attempt.Host
	}
	if c.p.needsKey(req) {
		key, err := c.p.key()
		if err != nil {
			closeBody(req.Body)
			return c.fail(&RetryError{Stop: StopInvalid, Err: err})
		}
		c.Key = key
	}
	c.body = replay.New(req, c.p.maxReplay, c.p.maxAttempts > 1, c.p.hedge)
	defer c.body.End()
	if c.keepsState() {
		defer c.detach()
		if s := c.t.states.Use(c.h); s != nil {
			c.attach(s)
			s.Touch(time.Now())
		} else if c.p.overload != nil {
			c.ensureState() // the overload controls learn from every attempt: state now
		}
	}
	if c.mayMove() {
		if c.host == "" {
			c.host = c.h.String() // Attempt.Host names each attempt's endpoint
		}
		c.fo = new(failover)
		c.fo.eps = c.t.hosts.endpoints(c.fo.buf[:0], c.h, c.host, req.URL.Scheme, c.p)
		c.fo.eps[0].state, c.fo.host = c.state, c.host
	}
	if c.p.hedge {
		c.startHedging()
	}
	defer c.unreserve() // a retry whose cost was taken is not sent, whatever ends the call
	return c.run(ctx)
}

// fail ends the call with e.
func (c *callState) fail(e *RetryError) (*http.Response, error) {
	c.stop = e.Stop
	return nil, e
}

func (c *callState) run(ctx context.Context) (*http.Response, error) {
	rc := c.req.Body
	if c.body != nil {
		rc = c.body.First()
	}
	var one attempt // the attempt in flight, when not hedging
	// holding is the attempt whose answer the call holds and has not yet
	// handed over or given up: a panic of a hook (OnAttempt, the Logger, a
	// Backoff or a Budget of the caller's) on the way gives it up, so that
	// its body and context do not outlive the call.
	var holding *attempt
	defer func() {
		if holding != nil {
			holding.abort()
		}
	}()
	for {
		var (
			a   *attempt
			err error
		)
		if c.delay > 0 && c.hedging() {
			a, err = c.sendHedged(ctx, rc)
		} else {
			a, err = &one, c.sendOne(ctx, rc, &one)
		}
		if err != nil {
			return c.refused(ctx, err)
		}
		rc = nil // later attempts get their body from the replay
		holding = a
		c.decide(ctx, a)
		if a.Retry && a.Response != nil {
			// Drain the response now, so its connection is reused during the
			// wait, and keep it in memory in case the retry is not sent.
			c.held = drain(ctx, a.Response, c.abandoned())
			a.drained = true
			a.end()
			if !fits(ctx, a.Delay, a) {
				c.unreserve()
				a.Retry, a.Delay, a.DelaySource, a.Stop = false, 0, DelayNone, StopDeadline
			}
		}
		if c.t.OnAttempt != nil || c.t.Logger != nil {
			c.observe(ctx, &a.Attempt)
		}
		c.last = a.Attempt
		if !a.Retry {
			resp, err := c.finish(ctx, a) // the budget's Succeeded, a caller's, runs first
			holding = nil
			return resp, err
		}
		discard(ctx, a.Response, c.abandoned())
		a.end()
		holding = nil
		if werr := backoff.Wait(ctx, a.Delay); werr != nil {
			c.unreserve()
			e := &RetryError{Attempts: c.sent, Err: a.Err, LastStatus: c.lastStatus, Stop: StopContext, Cause: werr}
			if errors.Is(werr, backoff.ErrDeadline) {
				e.Stop = StopDeadline
			}
			if ctx.Err() != nil {
				e.contextEnded(ctx)
			}
			return c.fail(e)
		}
	}
}

// finish ends the call after attempt a, which decided it.
func (c *callState) finish(ctx context.Context, a *attempt) (*http.Response, error) {
	c.stop = a.Stop
	if a.Stop == StopSuccess && c.state != nil && c.state.Budget != nil {
		c.state.Budget.Succeeded(c.sent-c.hedges > 1, c.timeoutRetry) // hedges are not the retry budget's
	}
	switch {
	case c.held != nil:
		return c.held, nil // drained, whole, before the retry was called off
	case a.Response != nil && !a.drained:
		a.handOver()
		if c.p.maxResumes > 0 {
			c.resumable(a.Response)
		}
		return a.Response, nil
	}
	// No response, or one whose body was drained past what is kept: the
	// caller gets the error, never a response that cannot be read.
	a.end()
	e := &RetryError{Attempts: c.sent, Err: a.Err, LastStatus: c.lastStatus, Stop: a.Stop}
	switch a.Stop {
	case StopDeadline:
		e.Cause = backoff.ErrDeadline
	case StopBudget:
		e.Cause = ErrBudgetExhausted
	case StopBreaker:
		e.Cause = ErrCircuitOpen
	}
	if ctx.Err() != nil {
		e.contextEnded(ctx)
	}
	return nil, e
}

// refused ends the call when its next attempt was refused: with the
// response in hand if there is one, else with a RetryError. When the
// caller's context ended first, the response is not returned, as after a
// wait.
func (c *callState) refused(ctx context.Context, err error) (*http.Response, error) {
	c.unreserve()
	r := err.(*refusal)
	c.stop = r.reason
	if r.reason != StopContext && r.reason != StopDeadline {
		c.logRefusal(ctx, r)
	}
	if c.held != nil && ctx.Err() == nil {
		return c.held, nil
	}
	e := &RetryError{Attempts: c.sent, Err: c.lastErr, LastStatus: c.lastStatus, Stop: r.reason, Cause: r.err}
	if c.sent == 0 {
		e.Err, e.Cause = r.err, nil
	}
	if ctx.Err() != nil {
		e.contextEnded(ctx)
	}
	return nil, e
}

// keepsState reports whether the call's policy keeps state per host: a
// budget, unless NewBudget is NoBudget (which newState finds out the first
// time), a breaker, an overload control, hedging.
func (c *callState) keepsState() bool {
	return !c.p.lean || !c.p.unbudgeted.Load()
}

// ensureState gives the call its host's state, creating it if the host
// has none, when the policy keeps state: a failure is to be counted, a
// hedge charged, a latency learnt. Calls create one at a time, so that
// calls whose first failures come at once share one state and NewBudget
// is called once per host. Past the table's bound the call goes on
// without state, as a host with fresh state would.
func (c *callState) ensureState() {
	if c.state != nil || !c.keepsState() {
		return
	}
	p := c.statePolicy()
	if s := c.t.states.Create(c.h, time.Now(), func() *hoststate.State { return p.newState(c.t, c.h.String()) }); s != nil {
		c.attach(s)
	}
}

// attach makes s, which the table counted as in use for the call (Use,
// Create), the call's host state until the call ends (detach), so that the
// table does not drop it meanwhile.
func (c *callState) attach(s *hoststate.State) {
	c.state = s
	if s.Budget != nil {
		s.Budget.Begin()
	}
}

// detach ends the call's use of its host state, and of its endpoints'.
func (c *callState) detach() {
	if c.moving() {
		eps := c.fo.eps
		eps[c.fo.cur].state = c.state
		for i := range eps {
			if s := eps[i].state; s != nil {
				s.Done()
			}
		}
		return
	}
	if c.state != nil {
		c.state.Done()
	}
}

// checkRequest rejects what no attempt could send, so that the failure is a
// clear ErrInvalidRequest rather than a retried transport error. The scheme
// is checked only when the Transport owns its Base, since a custom Base may
// speak others.
func checkRequest(req *http.Request, ownBase bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	switch {
	case req == nil:
		return bad("nil request")
	case req.URL == nil:
		return bad("nil URL")
	case req.Header == nil:
		return bad("nil Header")
	case req.URL.Host == "":
		return bad("no host in URL")
	case ownBase && !isHTTP(req.URL.Scheme):
		return bad("unsupported scheme %q", req.URL.Scheme)
	case req.Method != "" && !validToken(req.Method):
		return bad("invalid method %q", req.Method)
	case (req.Body == nil || req.Body == http.NoBody) && req.ContentLength > 0:
		return bad("ContentLength is %d but there is no body", req.ContentLength)
	}
	for name, values := range req.Header {
		if !validToken(name) {
			return bad("invalid header name %q", name)
		}
		for _, v := range values {
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return bad("invalid value for header %q", name)
			}
		}
	}
	return nil
}

func isHTTP(scheme string) bool {
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
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

// closeBody closes rc if there is one. It is the one way this package
// closes request and response bodies.
func closeBody(rc io.ReadCloser) {
	if rc != nil {
		rc.Close()
	}
}

// closeQuietly closes rc while a panic is on its way to the caller: a
// panic of rc's own Close is dropped, so that the first one goes on.
func closeQuietly(rc io.ReadCloser) {
	defer func() { recover() }()
	closeBody(rc)
}

func overridesFrom(ctx context.Context) overrides {
	o, _ := ctx.Value(overridesKey{}).(overrides)
	return o
}
