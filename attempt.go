package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry/internal/addrs"
	"github.com/seedhq/httpretry/internal/breaker"
	"github.com/seedhq/httpretry/internal/freshconn"
	"github.com/seedhq/httpretry/internal/hoststate"
	"github.com/seedhq/httpretry/internal/replay"
	"github.com/seedhq/httpretry/internal/signal"
)

// The attempt pipeline. Every attempt — the first, a retry, a hedge, a
// resume of a response body — goes through the same stages, in this order:
//
//  1. admission that costs nothing: the breaker (open: refused at once)
//     and the throttle;
//  2. preparation: the attempt's body (rewound for a retry), its request,
//     and PrepareRetry for a retry;
//  3. admission that waits: the pacer and the concurrency limit, each
//     bounded by what the context's deadline leaves (a hedge never waits);
//  4. the breaker's trial, taken last because it never waits;
//  5. send: Base.RoundTrip, on the caller's goroutine, or, in a hedged
//     round, on one of the round's;
//  6. settle: what Base returned, classified, and recorded where the host's
//     state learns from it.
//
// What a stage acquires is noted on the attempt, and one release gives
// back whatever it still holds, on every path: a refusal, a panic in Base,
// Classify or PrepareRetry, an attempt abandoned to a faster one.

// attemptKind is what an attempt is to its call.
type attemptKind uint8

const (
	firstAttempt  attemptKind = iota // the call's first
	retryAttempt                     // a retry, after a failure and its wait
	hedgeAttempt                     // a hedge, beside the attempts of its round
	resumeAttempt                    // a resume of a response body, after RoundTrip returned (body.go)
)

// A plan is everything that decides what one attempt does: made by
// planAttempt for every kind of attempt, completed at stage 1 with where
// it goes, and carried out by begin and send, whether the attempt is sent
// alone or in a hedged round. Nothing about an attempt is decided by a
// flag that only one of those paths reads.
type plan struct {
	kind    attemptKind
	n       int           // its number in the call, from 1
	inRound bool          // one of a hedged round's attempts, which may lose to another
	rewind  bool          // its body is the replay's next reader (a retry of a call with a body)
	prepare bool          // PrepareRetry edits its request
	ownConn bool          // it is sent on a connection of its own, dialled before its timer starts
	ownCtx  bool          // it has a context of its own under the caller's, ended with it
	timeout time.Duration // AttemptTimeout, started once it is sent (after the dial); 0: none

	readAhead int64 // its response body is read ahead up to this many bytes (Policy.ReadBodyBytes); 0: not

	// Where it goes, set at stage 1: the call's endpoint ep (0: the
	// request's own host, whose state it is booked to), and that
	// endpoint's URL host, "" for the request's own.
	ep   int
	addr string
}

// planAttempt returns the plan of the call's next attempt, of kind k; in
// a hedged round when inRound.
func (c *callState) planAttempt(k attemptKind, inRound bool) plan {
	pl := plan{kind: k, n: c.sent + 1, inRound: inRound, timeout: c.p.attemptTimeout}
	switch k {
	case retryAttempt:
		pl.rewind = c.body != nil
		pl.prepare = c.p.prepareRetry != nil
		pl.ownConn = c.fresh
	case resumeAttempt:
		pl.ownConn = c.fresh // a resume is read by the caller: its answer is never read ahead
	}
	if k != resumeAttempt {
		pl.readAhead = c.p.readBody
	}
	pl.ownCtx = pl.timeout > 0 || inRound || k == resumeAttempt || pl.ownConn
	return pl
}

// nextKind is the kind of the call's next attempt that is not a hedge.
func (c *callState) nextKind() attemptKind {
	if c.sent == 0 {
		return firstAttempt
	}
	return retryAttempt
}

// begin runs stages 1 to 4 for attempt a, planned by pl, with body rc;
// out holds the attempts of its hedged round in flight, if any. On a
// refusal it returns a *refusal; release then gives back what the earlier
// stages took and closes rc.
func (c *callState) begin(ctx context.Context, a *attempt, pl plan, rc io.ReadCloser, out []*attempt) error {
	*a = attempt{Attempt: Attempt{Host: c.host, N: pl.n, Hedge: pl.kind == hedgeAttempt, Resume: pl.kind == resumeAttempt},
		plan: pl, body: rc, replay: c.body, begun: true}

	// 1. Refusals that cost nothing, which also choose the endpoint.
	if c.moving() {
		if err := c.choose(a, out); err != nil {
			return err
		}
	} else {
		if c.fo != nil {
			a.Host, a.plan.ep = c.fo.host, c.fo.cur // a resume, on the endpoint that answered
		}
		if err := admitFree(c.state, a); err != nil {
			return err
		}
		if c.t.Fleet != nil {
			if err := c.admitFleet(a, time.Now()); err != nil {
				return err
			}
		}
	}
	a.plan.addr = c.endpointAddr()
	s := c.state

	// 2. Preparation.
	if pl.rewind {
		body, err := c.body.Next(ctx, false)
		switch {
		case err != nil && ctx.Err() != nil:
			// The caller's context ended while the retry waited for Base
			// to leave a Read of the body: the context stopped the call.
			return &refusal{StopContext, err}
		case err != nil:
			return &refusal{StopNotReplayable, err}
		}
		a.body = body
	}
	if pl.ownConn {
		c.fresh = false // taken: the retry after this one has its own if it needs one
	}
	actx := ctx
	if pl.ownCtx {
		actx = a.withContext(ctx)
	}
	a.Request = c.attemptRequest(actx, &a.plan, a.body)
	if pl.prepare {
		if err := c.p.prepareRetry(c.last, a.Request); err != nil {
			return &refusal{StopRefused, err}
		}
		c.edited, c.editedEp = a.Request, a.plan.ep // the hedges of this round carry its edits
		// A token refresh under the retry's context went through the
		// attempt's trace hooks: what they saw is not the attempt's.
		resetProgress(a.Request)
	}

	// 3. Admission that waits.
	if !a.cooling.IsZero() && (s == nil || s.Pacer == nil) {
		c.ensureState() // the fleet's cool-down is waited for by the host's pacer
		s = c.state
	}
	if s != nil && (s.Pacer != nil || s.Limiter != nil) {
		if err := c.admitWaiting(ctx, a, s); err != nil {
			return err
		}
	}

	// 4. The breaker's trial (taken at stage 1 by a half-open endpoint's).
	if s != nil && s.Breaker != nil && a.breakDone == nil {
		done, err := s.Breaker.Allow()
		if err != nil {
			s.BreakerRefusals.Add(1)
			return &refusal{StopBreaker, breakerRefusal(s.Breaker, err)}
		}
		a.breakDone = done
	}

	if timed := c.timed || c.deadline || (pl.n == 1 && c.learn != nil); timed || a.adm.limited {
		now := time.Now()
		if timed {
			a.start = now
		}
		a.adm.sent(ctx, now, pl.timeout)
	}
	a.sent = true
	c.sent++
	c.held = nil
	if pl.kind == retryAttempt || pl.kind == resumeAttempt {
		c.reserved = false // the retry is sent: its cost is spent
	}
	if pl.n > 1 && s != nil {
		s.Retries.Add(1)
	}
	return nil
}

// send sends attempt a, begun, through t's Base, as its plan says: over a
// connection of its own, dialled first, or the pool's; then under its
// timer; then its response body read ahead. It runs on the caller's
// goroutine, or, in a hedged round, on one of the round's, and touches
// nothing of the call's. fired reports that a's timer had fired by the
// time Base returned.
func (a *attempt) send(t *Transport) (resp *http.Response, err error, fired bool) {
	base := t.base
	if a.plan.ownConn {
		base = a.dial(t)
	}
	a.startTimer(a.plan.timeout)
	resp, err = base.RoundTrip(a.Request)
	if a.plan.readAhead > 0 {
		window := readAheadWindow
		if a.timer != nil {
			// Half of what AttemptTimeout leaves: a body that pauses is
			// handed over, not timed out.
			window = min(window, (a.plan.timeout-time.Since(a.timedAt))/2)
		}
		resp, err = readAheadOf(a.Request, resp, err, a.plan.readAhead, window)
	}
	fired = a.timer != nil && !a.timer.Stop()
	return resp, err, fired
}

// admitFree runs the admission that costs nothing for attempt a on state
// s (nil: a host without state, which admits everything): the breaker,
// open, refuses at once; then the throttle.
func admitFree(s *hoststate.State, a *attempt) error {
	if s == nil {
		return nil
	}
	if s.Breaker.IsOpen() {
		s.BreakerRefusals.Add(1)
		return &refusal{StopBreaker, breakerRefusal(s.Breaker, breaker.ErrOpen)}
	}
	if s.Throttle != nil {
		now := time.Now()
		if !s.Throttle.Admit(now) {
			return &refusal{StopThrottled, fmt.Errorf("%w (%s)", ErrThrottled, s.Key)}
		}
		a.adm.s, a.adm.throttled = s, true
	}
	return nil
}

// choose runs stage 1 over the call's endpoints (Policy.Endpoints): a
// goes to the first, the request's own host first, that admits it. A
// retry tries first the endpoints that have not failed in the call, a
// hedge those its round has no attempt out on; then the others, in order.
// A half-open breaker's trial is taken here rather than at stage 4, so
// that an attempt that finds every trial out moves on. When none
// admits, the refusal is the first endpoint's, and the call is back on
// its own host.
func (c *callState) choose(a *attempt, out []*attempt) error {
	retry, hedge := a.plan.kind == retryAttempt, a.plan.kind == hedgeAttempt
	var first error
	for pass := range 2 {
		for i := range c.fo.eps {
			if c.avoids(i, retry, hedge, out) != (pass == 1) {
				continue
			}
			c.moveTo(i)
			if c.state == nil && c.keepsState() {
				if s := c.t.states.Use(c.h); s != nil {
					c.attach(s)
				} else if c.statePolicy().overload != nil {
					c.ensureState() // the overload controls learn from every attempt
				}
			}
			err := admitFree(c.state, a)
			if err == nil && c.t.Fleet != nil {
				err = c.admitFleet(a, time.Now())
			}
			if s := c.state; err == nil && s != nil && s.Breaker.HalfOpen() {
				// Half-open: the trial is taken now, so that an attempt that
				// finds every trial out moves on rather than be refused at
				// stage 4.
				done, berr := s.Breaker.Allow()
				if berr != nil {
					s.BreakerRefusals.Add(1)
					err = &refusal{StopBreaker, breakerRefusal(s.Breaker, berr)}
				}
				a.breakDone = done
			}
			if err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			a.Host, a.plan.ep = c.fo.eps[i].host, i
			return nil
		}
	}
	c.moveTo(0)
	return first
}

// avoids reports whether the attempt being chosen prefers other endpoints
// to endpoint i: a retry one that failed in the call, a hedge one its
// round has an attempt out on.
func (c *callState) avoids(i int, retry, hedge bool, out []*attempt) bool {
	switch {
	case retry:
		return c.fo.eps[i].failed
	case hedge:
		return slices.ContainsFunc(out, func(x *attempt) bool { return x.plan.ep == i })
	}
	return false
}

// retryTarget returns the endpoint a retry is expected to go to, as
// choose will pick it, the throttle aside: the first endpoint not failed
// in the call whose breaker is not open, else the first whose breaker is
// not open; -1 when every breaker is open.
func (c *callState) retryTarget() int {
	for pass := range 2 {
		for i := range c.fo.eps {
			if c.avoids(i, true, false, nil) != (pass == 1) {
				continue // as choose orders a retry's endpoints
			}
			if s := c.stateOf(i); s == nil || !s.Breaker.IsOpen() {
				return i
			}
		}
	}
	return -1
}

// stateOf returns the state of endpoint i, nil if it has none yet.
func (c *callState) stateOf(i int) *hoststate.State {
	if i == c.fo.cur {
		return c.state
	}
	return c.fo.eps[i].state
}

// settle runs stage 6 for attempt a, to which Base returned resp and err;
// fired reports that its timeout had fired by then.
func (c *callState) settle(ctx context.Context, a *attempt, resp *http.Response, err error, fired bool) {
	if berr := c.body.Failed(a.body); berr != nil && err != nil {
		err = berr // the body broke, not the connection
	}
	discarded := a.settle(resp, err, fired)
	ok := false
	defer func() {
		// A response the attempt does not keep is closed once its outcome
		// is recorded: a Close of Base's that panics loses nothing of it.
		closeBody(discarded)
		a.settled = ok
	}()
	c.classify(a)
	if c.moving() && a.Class.retryable() {
		c.fo.eps[a.plan.ep].failed = true
	}
	// A retry after a failure that leaves its connection in the pool, or
	// after a dial of its own that failed, has a connection of its own.
	if a.dialFailed || needsFreshConn(a) {
		c.fresh = c.t.freshConns()
	}
	c.noteAddr(a)
	c.record(ctx, a)
	if c.learn != nil {
		c.learnFrom(ctx, a)
	}
	ok = true
}

// release gives back whatever attempt a still holds. After settle that is
// nothing; after a refusal or a panic it is its admission, given back
// without an outcome, its body if Base never had it, and its response and
// context.
func (a *attempt) release() {
	if !a.begun {
		return
	}
	if a.adm.s != nil {
		a.adm.done(time.Now(), signal.None, nil, nil)
	}
	if a.breakDone != nil {
		done := a.breakDone
		a.breakDone = nil
		done(breaker.Excluded)
	}
	if a.settled {
		return
	}
	if !a.sent {
		closeBody(a.body)
	} else if a.replay != nil {
		a.replay.Abandon(a.body) // Base panicked: it will not close it
	}
	if a.Response != nil {
		closeBody(a.Response.Body)
	}
	a.end()
}

// sendOne makes the next attempt, a, with body rc, on the caller's
// goroutine.
func (c *callState) sendOne(ctx context.Context, rc io.ReadCloser, a *attempt) error {
	defer a.release()
	if err := c.begin(ctx, a, c.planAttempt(c.nextKind(), false), rc, nil); err != nil {
		return err
	}
	resp, err, fired := a.send(c.t)
	c.settle(ctx, a, resp, err, fired)
	return nil
}

// noteAddr notes the address of the connection a failed on, when a's
// error names it and the Base is the default, whose dialer avoids it: in
// this call, whose next attempt then gets a connection of its own, and
// for a while across calls.
func (c *callState) noteAddr(a *attempt) {
	if c.t.addrs == nil || a.Response != nil || a.Err == nil || !a.Class.retryable() {
		return
	}
	ap, ok := addrs.Of(a.Err)
	if !ok {
		return
	}
	c.t.addrs.Failed(ap, time.Now())
	if c.failedAddrs == nil {
		c.failedAddrs = new(addrs.Set)
	}
	c.failedAddrs.Add(ap)
	c.fresh = c.t.freshConns()
}

// needsFreshConn reports whether the retry after attempt a, which Base
// (an *http.Transport) sent, should have a connection of its own: a
// failed in a way that leaves its connection in net/http's pool, if that
// connection speaks HTTP/2: a stream reset, or, for an https URL (where
// HTTP/2 is negotiated), an attempt timeout. net/http drops on its own a
// connection that failed itself (read and write errors, EOF, GOAWAY, an
// HTTP/2 connection error) and every HTTP/1 connection whose request
// failed or was cancelled, so the pool never hands those out again. Which
// protocol a timed-out attempt spoke is not known (a GotConn hook would
// cost every attempt an allocation): after a timeout on HTTP/1, the
// retry's connection of its own is one the pool would have dialled too,
// unless it had another idle.
func needsFreshConn(a *attempt) bool {
	if a.Response != nil || a.Err == nil || !a.Class.retryable() {
		return false
	}
	if h2Error(a.Err, h2AnyStream) {
		return true
	}
	return errors.Is(a.Err, ErrAttemptTimeout) && strings.EqualFold(a.Request.URL.Scheme, "https")
}

// dial gives attempt a a new connection of t's Base, closed when a's
// context ends (its response body closed, or the attempt discarded), and
// returns it. The dial comes before a's timer starts, with a bound of its
// own, the same: the attempt's AttemptTimeout is for its answer, as on a
// pooled connection that is already open, not for the handshake that the
// Transport chose to make, which under load can take most of it (and a
// dial cut short is lost, where the pool's outlives its request). When
// the dial fails, the attempt fails with its error, a timeout when its
// bound cut it short, and does not go back to the pool's connection;
// when Base turns out unable to make connections of their own at all,
// the attempt, and every later one, goes through its pool.
func (a *attempt) dial(t *Transport) http.RoundTripper {
	ctx := a.Request.Context()
	if timeout := a.plan.timeout; timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrAttemptTimeout)
		defer cancel()
	}
	// The connection is got outside net/http's getConn, whose hook would
	// have fired before its dial, as here: a dial error of a type the
	// rules do not know is judged as through the pool.
	gotConn(a.Request)
	conn, err := freshconn.Dial(ctx, t.base, a.Request.URL)
	switch {
	case errors.Is(err, freshconn.ErrUnsupported):
		t.noFreshConns(err)
		return t.base
	case err != nil:
		if context.Cause(ctx) == ErrAttemptTimeout {
			err = timeoutError(err)
		}
		a.dialFailed = true
		return failedDial{err}
	}
	context.AfterFunc(a.ctx, func() { conn.Close() })
	return conn
}

// failedDial sends nothing: it fails every request with the error of the
// dial of a connection of its own, closing the request's body as a
// RoundTripper must.
type failedDial struct{ err error }

func (f failedDial) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, f.err
}

// classify sets the class of a settled attempt: Policy.Classify, then the
// should-retry hint, then the built-in rules.
func (c *callState) classify(a *attempt) {
	p := c.p
	a.Class = ClassDefault
	if p.classify != nil {
		a.Class = p.classify(a.Request, a.Response, a.Err)
	}
	if a.Class == ClassDefault {
		a.Class = p.hints.shouldRetry(a.Response)
	}
	if a.Class == ClassDefault {
		a.Class = classify(a.Request, a.Response, a.Err, p)
	}
	if p.readBody > 0 {
		unbound(a.Response) // whatever Classify read, the body is whole again
	}
}

// record keeps what the host's state learns from attempt a: the breaker's
// count, the overload controls' signal, the statistics, and state for a
// host that failed for the first time. It gives back what a holds.
func (c *callState) record(ctx context.Context, a *attempt) {
	if a.Response != nil {
		c.lastStatus = a.Response.StatusCode
	}
	c.lastErr = a.Err
	outcome := breakerOutcome(ctx, &a.Attempt)
	if c.state == nil && outcome == breaker.Failure && c.keepsState() {
		c.ensureState()
		// The attempt was admitted by the fresh breaker this state starts
		// with; count it now.
		if a.breakDone == nil && c.state != nil && c.state.Breaker != nil {
			a.breakDone, _ = c.state.Breaker.Allow()
		}
	}
	if a.breakDone != nil {
		done := a.breakDone
		a.breakDone = nil
		done(outcome)
	}
	s := c.state
	if s == nil {
		if c.t.Fleet != nil {
			c.recordFleet(a, nil, outcome, time.Time{}, time.Now())
		}
		return
	}
	now := time.Now()
	var spent time.Time
	if a.adm.s != nil {
		sig := signal.None
		if !a.Lost {
			sig = loadSignal(ctx, a.Response, a.Err)
		}
		spent = a.adm.done(now, sig, a.Response, &c.p.pace)
	}
	if c.t.Fleet != nil {
		c.recordFleet(a, s, outcome, spent, now)
	}
	s.Touch(now)
	s.Attempts.Add(1)
	if outcome == breaker.Failure || a.Class.retryable() {
		s.Failed(int32(a.Class), now)
	}
}

// attemptRequest returns the request of the attempt planned by pl, with
// body rc: a clone of the caller's request when anything changes its
// header or its host, or several attempts are in flight at once (a hedged
// round), else a shallow copy. A hedge is made from the request
// PrepareRetry edited for its round, a resume from the one it edited
// last; either goes to its own endpoint, whichever the edited one went to.
func (c *callState) attemptRequest(ctx context.Context, pl *plan, rc io.ReadCloser) *http.Request {
	n := pl.n
	// Whether an earlier attempt of the call carried the request's key, so
	// that a 409 may say the original is still in flight: with the
	// Transport's own key, any attempt after the first; with the caller's,
	// every attempt (keySentUnknown: whether the caller set one is read
	// from the header when a 409 asks).
	keySent := keySentUnknown
	if c.Key != "" {
		keySent = keySentNo
		if n > 1 {
			keySent = keySentYes
		}
	}
	if c.failedAddrs != nil {
		ctx = addrs.WithFailed(ctx, c.failedAddrs)
	}
	ctx = newAttemptContext(ctx, n, keySent)
	src, srcEp := c.req, 0
	if (pl.kind == hedgeAttempt || pl.kind == resumeAttempt) && c.edited != nil {
		src, srcEp = c.edited, c.editedEp
	}
	moved := pl.ep != srcEp // src went to another endpoint than this attempt goes to
	var areq *http.Request
	switch {
	case pl.prepare || pl.kind == resumeAttempt || pl.inRound || moved:
		areq = src.Clone(ctx)
		switch {
		case moved && pl.addr == "":
			areq.URL.Host, areq.Host = c.req.URL.Host, c.req.Host // back to the request's own host
		case moved:
			// Another endpoint: its host in the URL (net/http's TLS server
			// name follows it) and in the Host header.
			areq.URL.Host, areq.Host = pl.addr, pl.addr
		}
	case c.Key != "" || c.p.attemptHeader != "":
		// Only the header changes: a shallow copy with a header of its
		// own, not a clone of the URL and the rest.
		areq = src.WithContext(ctx)
		areq.Header = src.Header.Clone()
	default:
		areq = src.WithContext(ctx)
	}
	if c.Key != "" {
		areq.Header[c.p.keyHeader] = []string{c.Key}
	}
	if c.p.attemptHeader != "" {
		setHeader(areq.Header, c.p.attemptHeader, strconv.Itoa(n))
	}
	if c.body != nil {
		areq.Body = rc
		areq.GetBody = c.body.GetBodyFor(ctx, c.req.GetBody)
	}
	return areq
}

// refusal is an attempt that was not sent: the breaker, an overload
// control, the body or PrepareRetry refused it, or (StopContext,
// StopDeadline) the caller's context ended, or was about to, while it
// waited for admission.
type refusal struct {
	reason StopReason
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

// breakerRefusal returns the error of an attempt that breaker b refused
// with err, one of breaker's refusals.
func breakerRefusal(b *breaker.Breaker, err error) error {
	if errors.Is(err, breaker.ErrTrials) {
		return fmt.Errorf("%w for %s (half-open, trial attempts in flight)", ErrCircuitOpen, b.Name())
	}
	return fmt.Errorf("%w for %s", ErrCircuitOpen, b.Name())
}

// errLost ends the context of an attempt that another attempt of its round
// beat; it is the Err of an Attempt with Lost set.
var errLost = errors.New("httpretry: cancelled, another attempt answered first")

// attempt is one attempt in flight: what observers see, and what the
// Transport needs to end its life.
type attempt struct {
	Attempt
	start      time.Time               // when it was sent; zero when nothing times attempts
	ctx        context.Context         // the attempt's own context; nil without AttemptTimeout or hedging
	cancel     context.CancelCauseFunc // ends ctx
	timer      *time.Timer             // AttemptTimeout's timer, nil without one
	timedAt    time.Time               // when timer started
	breakDone  func(breaker.Outcome)   // reports the outcome to the breaker; nil without one
	adm        admission               // what the host's overload controls gave it
	body       io.ReadCloser           // the request body Base was given
	replay     *replay.Replay          // where body came from; nil without a body
	begun      bool                    // the pipeline ran for it
	sent       bool                    // Base was given it
	settled    bool                    // what Base returned was classified and recorded
	drained    bool                    // the response's body was drained and closed
	plan       plan                    // what it does: where it goes, over which connection, under which timer
	fleetKey   string                  // its host's key in Transport.Fleet; "" when the fleet was not asked
	cooling    time.Time               // the fleet's cool-down of its host, for stage 3 to wait for; zero for none
	dialFailed bool                    // its connection of its own could not be dialled
}

// withContext gives a its own cancellable context under parent.
func (a *attempt) withContext(parent context.Context) context.Context {
	a.ctx, a.cancel = context.WithCancelCause(parent)
	return a.ctx
}

// startTimer bounds the attempt by d, when d > 0. The timeout covers
// sending the request and receiving the response header, and reading a
// body read ahead (Policy.ReadBodyBytes); once RoundTrip has a response,
// only closing its body (or discarding it) ends the context, so a slow
// body not read ahead still streams in full.
func (a *attempt) startTimer(d time.Duration) {
	if d > 0 && a.cancel != nil {
		cancel := a.cancel
		a.timedAt = time.Now()
		a.timer = time.AfterFunc(d, func() { cancel(ErrAttemptTimeout) })
	}
}

// settle records what Base returned. fired reports that the attempt's
// timer had fired by the time Base returned: the attempt then timed out
// whatever Base returned, since its context is cancelled and a response
// that raced the timer could not be read. It returns the body of a
// response it does not keep, for the caller to close.
func (a *attempt) settle(resp *http.Response, err error, fired bool) (discarded io.ReadCloser) {
	err = checkError(err)
	if !a.start.IsZero() {
		a.Duration = time.Since(a.start)
	}
	if fired {
		if resp != nil {
			discarded, resp = resp.Body, nil // it came after the attempt timed out
		}
		err = timeoutError(err)
	}
	if err != nil && resp != nil {
		discarded, resp = resp.Body, nil // a broken Base; the error wins, as in http.Client
	}
	if resp == nil && err == nil {
		err = errors.New("httpretry: Base returned neither a response nor an error")
	}
	a.Response, a.Err = resp, err
	return discarded
}

// handOver ties the attempt's context to the body of the response returned
// to the caller: it ends when the body is closed.
func (a *attempt) handOver() {
	if a.cancel == nil {
		return
	}
	resp := a.Response
	if resp.Body == nil || resp.Body == http.NoBody {
		a.cancel(nil)
		return
	}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = &cancelRWBody{rw, a.cancel}
		return
	}
	resp.Body = &cancelBody{resp.Body, a.cancel}
}

// lose ends the context of an attempt that another attempt beat.
func (a *attempt) lose() {
	if a.cancel != nil {
		a.cancel(errLost)
	}
}

// end ends the attempt's context at once, for an attempt whose response is
// not returned.
func (a *attempt) end() {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.cancel != nil {
		a.cancel(nil)
	}
}

// abort gives up a's answer when a panic ends the call before it was
// handed over: its body is closed and its context ended.
func (a *attempt) abort() {
	if a.Response != nil && !a.drained {
		closeQuietly(a.Response.Body)
	}
	a.end()
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// cancelRWBody keeps the body writable for 101 Switching Protocols.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}

// timeoutError describes an attempt that AttemptTimeout cut short when
// Base reported the cancellation in its own words.
func timeoutError(err error) error {
	if err == nil || errors.Is(err, ErrAttemptTimeout) {
		return ErrAttemptTimeout
	}
	return fmt.Errorf("%w (%v)", ErrAttemptTimeout, err)
}

// attemptKey is the context key under which an attempt's context finds
// itself.
type attemptKey struct{}

// attemptContext is the context of an attempt's request. It carries the
// attempt number to the layers under the Transport, and watches, through
// an httptrace.ClientTrace composed with any the caller installed, how far
// net/http took the attempt: whether it reached a connection, and whether
// the request was written on it. An error of a type the rules do not know
// is judged by that (see Classify). Each hook costs an allocation on every
// attempt, since hooks carry no request of their own: the two that tell
// what the rules need, and no more.
type attemptContext struct {
	context.Context
	n       int
	keySent keySent
	trace   httptrace.ClientTrace

	conns atomic.Int32 // GetConn: net/http began to get a connection for the request
	wrote atomic.Int32 // WroteHeaders: the request's header was written to one
}

// keySent says whether an earlier attempt of a call carried the key its
// attempt carries.
type keySent uint8

const (
	keySentUnknown keySent = iota // the Transport added no key: sent before if the caller set one
	keySentNo                     // the Transport's key, on the call's first attempt
	keySentYes                    // the Transport's key, on a later attempt
)

// newAttemptContext returns the context of attempt n under parent.
func newAttemptContext(parent context.Context, n int, keySent keySent) context.Context {
	c := &attemptContext{Context: parent, n: n, keySent: keySent}
	c.trace.GetConn = c.getConn
	c.trace.WroteHeaders = c.wroteHeaders
	return httptrace.WithClientTrace(c, &c.trace)
}

func (c *attemptContext) getConn(string) { c.conns.Add(1) }

func (c *attemptContext) wroteHeaders() { c.wrote.Add(1) }

func (c *attemptContext) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// progress is how far net/http took an attempt before it failed.
type progress uint8

const (
	progressUnknown progress = iota // not an attempt of a Transport
	progressNone                    // it never reached a connection: a layer above net/http failed
	progressConn                    // it reached a connection, but nothing of it was written
	progressWritten                 // it was written
)

// progressOf returns how far net/http took req, an attempt of a Transport.
func progressOf(req *http.Request) progress {
	if req == nil {
		return progressUnknown
	}
	c, ok := req.Context().Value(attemptKey{}).(*attemptContext)
	if !ok {
		return progressUnknown
	}
	switch {
	case c.conns.Load() == 0:
		return progressNone
	case c.wrote.Load() == 0:
		return progressConn
	}
	return progressWritten
}

// resetProgress forgets what req's trace hooks saw so far.
func resetProgress(req *http.Request) {
	if c, ok := req.Context().Value(attemptKey{}).(*attemptContext); ok {
		c.conns.Store(0)
		c.wrote.Store(0)
	}
}

// gotConn records that req, an attempt of a Transport, has a connection
// that net/http's getConn did not give it, so its hooks did not see it.
func gotConn(req *http.Request) {
	if c, ok := req.Context().Value(attemptKey{}).(*attemptContext); ok {
		c.conns.Add(1)
	}
}

// keySentBefore reports whether req, a keyed request, may carry a key
// that was sent before: for an attempt of a Transport, a key it added that
// an earlier attempt of the call carried, or a key the caller set; for any
// other request, always.
func keySentBefore(req *http.Request) bool {
	c, ok := req.Context().Value(attemptKey{}).(*attemptContext)
	return !ok || c.keySent != keySentNo
}

// AttemptFromContext returns the attempt number (1 for the first attempt,
// 2 for the first retry, …) that a Transport put in the context of the
// request it passes to its Base. It reports false for a context that did
// not come from a Transport. OpenTelemetry's http.request.resend_count is
// the attempt number minus one.
func AttemptFromContext(ctx context.Context) (int, bool) {
	if c, ok := ctx.Value(attemptKey{}).(*attemptContext); ok {
		return c.n, true
	}
	return 0, false
}

// ErrAttemptTimeout is the error of an attempt that Policy.AttemptTimeout
// cut short. It is transient, and errors.Is reports it as
// context.DeadlineExceeded too.
var ErrAttemptTimeout error = attemptTimeoutError{}

type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string { return "httpretry: attempt timed out" }

func (attemptTimeoutError) Timeout() bool { return true }

func (attemptTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
