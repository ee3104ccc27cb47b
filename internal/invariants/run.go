package invariants

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// run is one scenario being played, inside its own synctest bubble.
type run struct {
	s      *scenario
	start  time.Time
	tr     *httpretry.Transport
	up     *upstream
	calls  []*callRun
	log    lockedBuffer
	keyN   atomic.Int64
	panics panics

	mu         sync.Mutex
	buckets    []httpretry.Budget // small token buckets handed to the Transport
	ratios     []httpretry.Budget // ratio budgets handed to the Transport
	ledgers    []*ledger
	violations []string
	active     map[string]int   // by host key: calls in flight
	begun      map[string]int   // by host key: calls begun so far
	quiets     map[string]quiet // by host key: its state when its calls last ended
}

// callRun is one call being played.
type callRun struct {
	spec   *callSpec
	rawURL string
	req    *http.Request
	snap   reqSnapshot
	ctx    context.Context
	cancel context.CancelCauseFunc

	stopDeadline context.CancelFunc // never called: see context
	used         bool               // a nested call's slot was taken (guarded by run.mu)
	parent       context.Context    // a nested call's parent context; nil: none
	underAttempt map[int]bool       // attempts under whose context PrepareRetry made a call

	mu          sync.Mutex
	cancelledAt time.Time // zero if the caller never cancelled
	afterDrain  bool      // it cancelled from OnAttempt or PrepareRetry
	bodies      []*reqBody
	stream      *streamBody // the live stream, for bodyStream
	prepared    int         // calls of PrepareRetry
	attempts    []httpretry.Attempt
	onCalls     []httpretry.Call

	resp        *http.Response
	err         error
	panicked    string
	began       time.Time
	returned    time.Time
	ctxAtReturn error // the caller's context's error right after RoundTrip returned

	read        []byte // what was read of the returned body
	readErr     error
	readCtxDone bool // the caller's context had ended when the read failed
	writable    bool // the returned body is an io.Writer
}

// violate records a broken invariant.
func (r *run) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// play runs scenario s and returns the invariants it broke. It must run
// inside a synctest bubble; when it returns, every goroutine it started
// must have ended.
func play(s *scenario) []string {
	r := &run{s: s, start: time.Now()}
	r.up = &upstream{r: r, script: httpretrytest.NewScript()}
	r.up.below, r.up.probe = r.up.layered(roundTripFunc(r.up.answer)), roundTripFunc(answerProbe)
	if s.base != baseScripted {
		ru, bottom := r.up.newRealUpstream(s.base, s.keepAlive)
		defer ru.stop()
		r.up.below, r.up.probe = r.up.layered(bottom), ru.client
	}
	for _, spec := range s.calls {
		r.calls = append(r.calls, &callRun{spec: spec, rawURL: spec.rawURL()})
	}
	r.route()
	r.tr = r.transport()
	// No scenario should take this long, even on the fake clock: if one
	// does, its calls are cancelled so that it ends, and it is reported.
	watchdog := time.AfterFunc(watchdogAfter, func() {
		r.violate("still running after %v: the calls were cancelled", watchdogAfter)
		for _, c := range r.calls {
			c.doCancel()
		}
	})
	defer watchdog.Stop()
	var wg sync.WaitGroup
	for _, c := range r.top()[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(c.spec.start)
			r.do(c)
		}()
	}
	r.do(r.calls[0])
	wg.Wait()
	if s.base != baseScripted {
		// net/http's write loop may send a request body after RoundTrip
		// returned (a server that answered first), and close it then.
		time.Sleep(time.Second)
	}
	synctest.Wait()
	r.check()
	if traceTo != nil {
		traceTo(r.trace())
	}
	if r.s.has(rbNopClose) {
		// A drain gives up on a body whose Close does not end its Read, and
		// leaves the Read to its goroutine, which ends with it: its body
		// trickles to its end within a second.
		time.Sleep(time.Second)
	}
	r.checkHeld()
	return r.violations
}

// traceTo, when set, receives the trace of each scenario played (in
// replay mode).
var traceTo func(string)

// trace tells what happened, on the scenario's clock: each attempt as Base
// saw it, each OnAttempt record and what each call returned.
func (r *run) trace() string {
	var b strings.Builder
	at := func(t time.Time) time.Duration { return t.Sub(r.start) }
	for _, rec := range r.up.records() {
		what := fmt.Sprintf("status %d", rec.status)
		if rec.err != nil {
			what = "error " + safeError(rec.err)
		}
		fmt.Fprintf(&b, "\tbase: call%d attempt %d %v→%v: %s (attempt context: %v, caller's ended: %v)\n",
			rec.call, rec.n, at(rec.start), at(rec.end), what, rec.ctxCause, rec.callerDone)
	}
	for _, c := range r.calls {
		if !c.made() {
			continue
		}
		for _, a := range c.attempts {
			status := 0
			if a.Response != nil {
				status = a.Response.StatusCode
			}
			fmt.Fprintf(&b, "\tOnAttempt: call%d attempt %d hedge=%v lost=%v status=%d err=%v class=%v retry=%v delay=%v(%v) stop=%v\n",
				c.spec.idx, a.N, a.Hedge, a.Lost, status, a.Err, a.Class, a.Retry, a.Delay, a.DelaySource, a.Stop)
		}
		status := 0
		if c.resp != nil {
			status = c.resp.StatusCode
		}
		fmt.Fprintf(&b, "\tcall%d: began %v, returned %v: status %d, error %v; cancelled at %v\n",
			c.spec.idx, at(c.began), at(c.returned), status, c.err, at(c.cancelled()))
	}
	return b.String()
}

// watchdogAfter bounds a scenario's time on the fake clock.
const watchdogAfter = 1000 * time.Hour

// route gives each attempt of each call its scripted outcome, whatever
// order attempts arrive in.
func (r *run) route() {
	attempt := func(req *http.Request) int {
		n, _ := httpretry.AttemptFromContext(req.Context())
		return n
	}
	r.up.script.On(func(req *http.Request) bool { return attempt(req) > successAfter }, enough.build(r, r.calls[0]))
	for _, c := range r.calls {
		for i, o := range c.spec.script {
			r.up.script.On(func(req *http.Request) bool {
				return callOf(req.URL) == c.spec.idx && attempt(req) == i+1
			}, o.build(r, c))
		}
		last := c.spec.script[len(c.spec.script)-1]
		r.up.script.On(func(req *http.Request) bool { return callOf(req.URL) == c.spec.idx }, last.build(r, c))
	}
}

var (
	errRefused = errors.New("PrepareRetry refuses")
	errGetBody = errors.New("GetBody cannot rewind")
)

// policy builds the drawn Policy.
func (r *run) policy() httpretry.Policy {
	p := &r.s.pol
	pol := httpretry.Policy{
		MaxAttempts:    p.maxAttempts,
		Backoff:        backoffs[p.backoff].s,
		AttemptTimeout: p.attemptTimeout,
		MaxRetryAfter:  p.maxRetryAfter,
		MaxReplayBytes: p.maxReplay,
		AttemptHeader:  p.attemptHeader,
	}
	switch p.keys {
	case keysOff:
		pol.Keys.Disabled = true
	case keysHeader:
		pol.Keys.Header = customKeyHeader
	case keysQuoted:
		pol.Keys.Quoted = true
	case keysMethods:
		pol.Keys.Methods = []string{"POST", "patch", "DELETE"}
	case keysNew:
		pol.Keys.New = func() string { return "key-" + strconv.FormatInt(r.keyN.Add(1), 10) }
	case keysEmpty:
		pol.Keys.New = func() string { return "" }
	}
	switch p.budget {
	case budgetNone:
		pol.NewBudget = httpretry.NoBudget
	case budgetRatio:
		pol.NewBudget = func(string) httpretry.Budget {
			b := httpretry.NewRatioBudget(httpretry.RatioConfig{Ratio: 0.5, Window: time.Second, MinPerSecond: 2})
			r.mu.Lock()
			r.ratios = append(r.ratios, b)
			r.mu.Unlock()
			return b
		}
	case budgetTiny:
		pol.NewBudget = func(string) httpretry.Budget {
			b := httpretry.NewTokenBucket(tinyBucket)
			r.mu.Lock()
			r.buckets = append(r.buckets, b)
			r.mu.Unlock()
			return b
		}
	case budgetLedger:
		pol.NewBudget = func(host string) httpretry.Budget {
			l := &ledger{inner: httpretry.NewTokenBucket(tinyBucket), r: r, host: host}
			r.mu.Lock()
			r.ledgers = append(r.ledgers, l)
			r.mu.Unlock()
			return l
		}
	}
	day := 24 * time.Hour
	switch p.breaker {
	case 1, 2, 3:
		pol.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: p.breaker, Window: day, OpenFor: day}
	case 4:
		pol.Breaker = httpretry.BreakerPolicy{FailureRatio: 0.5, MinRequests: 3, Window: day, OpenFor: day}
	}
	if p.hedgeDelay > 0 {
		pol.Hedge = httpretry.HedgePolicy{Delay: p.hedgeDelay, MaxHedges: p.maxHedges}
		switch p.adaptive {
		case 1:
			pol.Hedge.Adaptive = true
		case 2:
			pol.Hedge.Adaptive, pol.Hedge.MinSamples = true, 2
			pol.Hedge.MinDelay, pol.Hedge.MaxDelay = 2*ms, 100*ms
		}
	}
	switch p.overload {
	case overloadThrottle:
		pol.Overload = httpretry.OverloadPolicy{Throttle: true, ThrottleK: 1.1, ThrottleWindow: time.Second}
	case overloadLimit:
		pol.Overload = httpretry.OverloadPolicy{Limit: true, LimitMax: 2, LimitQueue: int(r.s.seed%3) - 1}
	case overloadPace:
		pol.Overload = httpretry.OverloadPolicy{Pace: true}
	case overloadPaceFailFast:
		pol.Overload = httpretry.OverloadPolicy{Pace: true, PaceFailFast: true}
	case overloadAll:
		pol.Overload = httpretry.OverloadPolicy{Throttle: true, ThrottleK: 1.1, ThrottleWindow: time.Second,
			Limit: true, LimitMax: 2, Pace: true}
	}
	if p.should {
		pol.Hints.ShouldRetryHeader = shouldHeader
	}
	if p.reset != 0 {
		pol.Hints.ResetHeader = resetHeader
	}
	pol.Hints.IgnoreRateLimit = p.ignoreRL
	if fn := classifiers[p.classifier]; fn != nil {
		pol.Classify = func(req *http.Request, resp *http.Response, err error) httpretry.Class {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			return fn(status, err)
		}
	}
	var prepare func(prev httpretry.Attempt, next *http.Request) error
	switch p.prepare {
	case prepareEdit:
		prepare = func(prev httpretry.Attempt, next *http.Request) error {
			next.Header.Set("X-Retry-Of", strconv.Itoa(prev.N))
			next.Header.Del("X-Caller")
			return nil
		}
	case prepareRefuse:
		prepare = func(prev httpretry.Attempt, next *http.Request) error {
			if prev.N >= p.prepareN {
				return errRefused
			}
			return nil
		}
	case prepareCancel:
		prepare = func(prev httpretry.Attempt, next *http.Request) error {
			if prev.N >= p.prepareN {
				r.calls[callOf(next.URL)].cancelAfterDrain()
			}
			return nil
		}
	case prepareNested:
		prepare = r.prepareNestedCall
	}
	if prepare != nil {
		pol.PrepareRetry = func(prev httpretry.Attempt, next *http.Request) error {
			c := r.calls[callOf(next.URL)]
			c.mu.Lock()
			c.prepared++
			c.mu.Unlock()
			return prepare(prev, next)
		}
	}
	r.wrapHooks(&pol)
	return pol
}

// transport builds the Transport, its policy placed as drawn.
func (r *run) transport() *httpretry.Transport {
	pol := r.policy()
	tr := &httpretry.Transport{Base: r.up, OnAttempt: r.onAttempt, OnCall: r.onCall}
	switch r.s.pol.placement {
	case 0:
		tr.Policy = pol
	case 1:
		tr.Hosts = map[string]httpretry.Policy{"api.example.com": pol}
	case 2:
		tr.Hosts = map[string]httpretry.Policy{"*.example.com": pol}
	case 3:
		tr.Hosts = map[string]httpretry.Policy{"api.example.com:443": pol}
	case 4:
		entry := httpretry.Policy{MaxAttempts: pol.MaxAttempts, Hedge: pol.Hedge, Keys: pol.Keys}
		pol.MaxAttempts, pol.Hedge, pol.Keys = 0, httpretry.HedgePolicy{}, httpretry.KeyPolicy{}
		tr.Policy = pol
		tr.Hosts = map[string]httpretry.Policy{"api.example.com": entry}
	case 5:
		// The host allows no retry; its calls' paths restore the drawn
		// attempts. Paths match cleaned ("/c0//pay", "/c0/./pay").
		host := pol
		host.MaxAttempts = 1
		tr.Hosts = map[string]httpretry.Policy{"api.example.com": host}
		for _, c := range r.calls {
			tr.Hosts[fmt.Sprintf("api.example.com/c%d/pay", c.spec.idx)] = httpretry.Policy{
				MaxAttempts: cmp.Or(pol.MaxAttempts, defaultMaxAttempts)}
		}
	}
	if r.s.hostLimit > 0 {
		r.s.opts.SetHostLimit(tr, r.s.hostLimit)
	}
	if r.s.logger {
		tr.Logger = slog.New(slog.NewTextHandler(&r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return tr
}

// onAttempt is the Transport's OnAttempt.
func (r *run) onAttempt(a httpretry.Attempt) {
	if a.Request == nil || a.Request.URL == nil {
		r.violate("OnAttempt: attempt %d without its request", a.N)
		return
	}
	if isProbe(a.Request) {
		return
	}
	c := r.calls[callOf(a.Request.URL)]
	c.mu.Lock()
	c.attempts = append(c.attempts, a)
	c.mu.Unlock()
	r.checkLevels("in OnAttempt")
	r.checkHostBound("in OnAttempt")
	if c.spec.cancel == cancelAtRetry && a.Retry && a.N >= c.spec.cancelN {
		c.cancelAfterDrain()
	}
	if r.panicAt(panicOnAttempt, c.spec.idx, a.N) {
		r.throw(c.spec.idx, panicOnAttempt, a.N)
	}
}

// onCall is the Transport's OnCall.
func (r *run) onCall(call httpretry.Call) {
	if call.Request != nil && call.Request.URL != nil && isProbe(call.Request) {
		return
	}
	for _, c := range r.calls {
		c.mu.Lock()
		mine := c.req == call.Request
		c.mu.Unlock()
		if mine {
			c.mu.Lock()
			c.onCalls = append(c.onCalls, call)
			c.mu.Unlock()
			if r.panicAt(panicOnCall, c.spec.idx, r.s.panic.n) {
				r.throw(c.spec.idx, panicOnCall, r.s.panic.n)
			}
			return
		}
	}
	r.violate("OnCall: a call with a request that no caller sent")
}

// doCancel cancels the caller's context, once, with the drawn cause.
func (c *callRun) doCancel() { c.cancelNow(false) }

// cancelAfterDrain cancels from OnAttempt or PrepareRetry, which run after
// the Transport drained the response it discards.
func (c *callRun) cancelAfterDrain() { c.cancelNow(true) }

func (c *callRun) cancelNow(afterDrain bool) {
	c.mu.Lock()
	first, cancel := c.cancelledAt.IsZero() && c.cancel != nil, c.cancel
	if first {
		c.cancelledAt, c.afterDrain = time.Now(), afterDrain
	}
	c.mu.Unlock()
	if !first {
		return
	}
	var cause error
	switch c.spec.cause {
	case causeError:
		cause = errors.New("caller gave up")
	case causeUncomparable:
		cause = uncomparableError{[]string{"caller", "gave", "up"}}
	}
	cancel(cause)
}

func (c *callRun) cancelled() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelledAt
}

// context builds the caller's context of the call.
func (c *callRun) context() context.Context {
	ctx := context.Background()
	if c.parent != nil {
		ctx = c.parent
	}
	switch c.spec.override {
	case overrideWithoutRetries:
		ctx = httpretry.WithoutRetries(ctx)
	case overrideAttempts2:
		ctx = httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.MaxAttempts = 2 })
	case overrideTimeout:
		ctx = httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.AttemptTimeout = 31 * ms })
	case overrideNoHedge:
		ctx = httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.Hedge = httpretry.HedgePolicy{Disabled: true} })
	case overrideBudget:
		ctx = httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.NewBudget = httpretry.NoBudget })
	case overrideBoth:
		ctx = httpretry.WithoutRetries(ctx)
		ctx = httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.MaxAttempts = 2 })
	}
	if c.spec.deadline > 0 {
		// The deadline ends it: the caller never cancels it early, so that
		// a goroutine waiting on it after RoundTrip returned is seen.
		ctx, c.stopDeadline = context.WithTimeout(ctx, c.spec.deadline)
	}
	ctx = context.WithValue(ctx, callKey{}, c.spec.idx)
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	return ctx
}

// do plays call c: RoundTrip, then reading and closing what it returned.
func (r *run) do(c *callRun) {
	c.ctx = c.context()
	req := c.request(c.ctx)
	c.mu.Lock()
	c.req = req
	c.mu.Unlock()
	c.snap = snapshot(c.req)
	c.began = time.Now()
	var timer *time.Timer
	switch c.spec.cancel {
	case cancelBefore:
		c.doCancel()
	case cancelAtTime:
		timer = time.AfterFunc(c.spec.cancelAt, c.doCancel)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.caught(c.spec.idx, p)
				c.panicked = fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
		}()
		r.began(c)
		defer r.ended(c)
		c.resp, c.err = r.tr.RoundTrip(c.req)
	}()
	c.returned = time.Now()
	c.ctxAtReturn = c.ctx.Err()
	if c.resp != nil && c.resp.Body != nil {
		r.readResponse(c)
	}
	if timer != nil {
		timer.Stop()
	}
}

// readLimit bounds how much of an endless returned body is read: past the
// 64 KiB the Transport drains, which is all that matters.
const readLimit = 72 << 10

// readResponse reads the returned body to its end (or readLimit), then
// closes it.
func (r *run) readResponse(c *callRun) {
	limit := readLimit
	if n, ok := attemptOf(c.resp); ok && c.spec.outcomeFor(n).body == rbSlowEndless {
		limit = 1 << 10
	}
	body := c.resp.Body
	defer func() {
		if p := recover(); p != nil {
			r.caught(c.spec.idx, p)
			if _, ours := p.(panicValue); !ours {
				r.violate("call%d: reading or closing the returned body panicked: %v", c.spec.idx, p)
			}
		}
	}()
	reading := true
	defer func() {
		if p := recover(); p != nil {
			if reading {
				body.Close() // the Read panicked: the body is closed all the same
			}
			panic(p)
		}
	}()
	_, c.writable = body.(io.Writer)
	buf := make([]byte, 8<<10)
	for len(c.read) < limit {
		n, err := body.Read(buf[:min(len(buf), limit-len(c.read))])
		c.read = append(c.read, buf[:n]...)
		if err != nil {
			if err != io.EOF {
				c.readErr = err
				c.readCtxDone = c.ctx.Err() != nil
			}
			break
		}
	}
	reading = false
	body.Close()
}

// attemptOf returns the attempt number of the request a response answers.
func attemptOf(resp *http.Response) (int, bool) {
	if resp == nil || resp.Request == nil {
		return 0, false
	}
	return httpretry.AttemptFromContext(resp.Request.Context())
}

// reqSnapshot is what the caller's request held before RoundTrip.
type reqSnapshot struct {
	method        string
	url           *url.URL
	urlValue      url.URL
	urlString     string
	header        http.Header
	headerPtr     uintptr
	body          io.ReadCloser
	getBody       uintptr
	contentLength int64
	ctx           context.Context
}

func snapshot(req *http.Request) reqSnapshot {
	s := reqSnapshot{method: req.Method, url: req.URL, urlValue: *req.URL, urlString: req.URL.String(),
		header: req.Header.Clone(), body: req.Body, contentLength: req.ContentLength, ctx: req.Context()}
	if req.Header != nil {
		s.headerPtr = reflect.ValueOf(req.Header).Pointer()
	}
	if req.GetBody != nil {
		s.getBody = reflect.ValueOf(req.GetBody).Pointer()
	}
	return s
}

// changes lists how req differs from the snapshot.
func (s *reqSnapshot) changes(req *http.Request) []string {
	var out []string
	if req.Method != s.method {
		out = append(out, fmt.Sprintf("method %q became %q", s.method, req.Method))
	}
	if req.URL != s.url || *req.URL != s.urlValue || req.URL.String() != s.urlString {
		out = append(out, "URL changed")
	}
	if !reflect.DeepEqual(req.Header, s.header) || (req.Header != nil && reflect.ValueOf(req.Header).Pointer() != s.headerPtr) {
		out = append(out, fmt.Sprintf("header %v became %v", s.header, req.Header))
	}
	if req.Body != s.body {
		out = append(out, "Body replaced")
	}
	var gb uintptr
	if req.GetBody != nil {
		gb = reflect.ValueOf(req.GetBody).Pointer()
	}
	if gb != s.getBody {
		out = append(out, "GetBody replaced")
	}
	if req.ContentLength != s.contentLength {
		out = append(out, "ContentLength changed")
	}
	if req.Context() != s.ctx {
		out = append(out, "context replaced")
	}
	return out
}
