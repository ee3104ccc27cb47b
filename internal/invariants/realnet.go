package invariants

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/seedhq/httpretry"
)

// What Base is. Most scenarios play a scripted upstream (answer). Some put
// a real net/http client under the Transport: an *http.Transport whose
// DialContext returns in-memory net.Pipe connections to an http.Server
// that runs in the bubble, on a listener fed by a channel; net.Pipe, the
// server and the client all block durably, so the bubble's clock runs as
// with the scripted upstream. Some wrap that client in an http.Client,
// whose CheckRedirect refuses redirects past the first. And Base may have
// layers over either: a tracing layer that installs an
// httptrace.ClientTrace of its own on each request's context (as
// otelhttp's does), and a signer that hashes the body through GetBody
// before it passes the request on, and may fail before it does, with an
// error of no known type.
const (
	baseScripted = iota
	baseReal     // an *http.Transport over net.Pipe to an http.Server
	baseClient   // the same, in an http.Client with CheckRedirect
)

var baseNames = []string{"scripted", "net/http", "http.Client"}

const (
	layersNone   = iota
	layersTrace  // an otelhttp-style tracing layer
	layersSigner // a signer
	layersBoth   // the tracing layer over the signer
)

var layersNames = []string{"none", "trace", "signer", "trace+signer"}

// bases draws what Base is.
func (g gen) bases(s *scenario) {
	if g.chance(0.08) {
		s.base = pick(g, baseReal, baseReal, baseClient)
		s.keepAlive = g.chance(0.5)
	}
	if g.chance(0.12) {
		s.layers = 1 + g.r.IntN(3)
		s.signReads = g.chance(0.7)
	}
}

// forRealNet makes a drawn call playable by a real net/http client and
// server: errors a server can cause (a refused dial, a connection hung up
// on), no informational statuses (net/http's client reads past them), no
// body for 204 and 304, and no body whose Close does not end a Read; with
// an http.Client, some answers are redirects. Slow bodies of the caller
// that the Transport reads as streams are not drawn: net/http closes a
// body while its write loop may be inside a Read of it, and that Close
// waits for the Read, which inside a bubble is not a durable block.
func (g gen) forRealNet(s *scenario, c *callSpec) {
	if s.base == baseScripted {
		return
	}
	switch c.body {
	case bodyGetBodySlow:
		c.body = bodyGetBody
	case bodySeekSlow:
		c.body = bodySeek
	}
	for _, o := range c.script {
		realOutcome(g, s, o)
	}
}

func realOutcome(g gen, s *scenario, o *outcome) {
	switch {
	case o.err >= 0 && errKinds[o.err].name == "refused":
	case o.err >= 0 && errKinds[o.err].name == "signer" && s.layers >= layersSigner:
	case o.err >= 0 || o.broken != brokenNone:
		o.err, o.broken, o.stage = errKindNamed("hangup"), brokenNone, stageWritten
	}
	if o.err >= 0 {
		return
	}
	switch {
	case o.status < 200:
		o.status = 200
	case o.status == 204 || o.status == 304:
		o.body = rbEmpty
	}
	if o.body == rbNopClose {
		o.body = rbTrickleShort
	}
	o.late = false
	if s.base == baseClient && g.chance(0.15) {
		o.redirect = 1 + g.r.IntN(3)
		o.headers, o.status, o.body = nil, 200, rbText
	}
	o.early = g.chance(0.15)
}

// realUpstream is the http.Server end of a real Base, and the client.
type realUpstream struct {
	u        *upstream
	srv      *http.Server
	ln       *pipeListener
	client   *http.Transport
	done     chan struct{} // closed by stop: handlers end their waits
	handlers sync.WaitGroup
}

// newRealUpstream starts the server in the bubble and returns Base's
// bottom: the client, as an http.Transport or in an http.Client.
func (u *upstream) newRealUpstream(kind int, keepAlive bool) (*realUpstream, http.RoundTripper) {
	ru := &realUpstream{u: u, ln: &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}, done: make(chan struct{})}
	ru.srv = &http.Server{Handler: http.HandlerFunc(ru.serve), ErrorLog: discardLog}
	go ru.srv.Serve(ru.ln)
	// The URLs are https: DialTLSContext's connection counts as past its
	// handshake, so the client speaks plain HTTP over the pipe.
	ru.client = &http.Transport{DialContext: ru.dial, DialTLSContext: ru.dial, DisableKeepAlives: !keepAlive}
	var bottom http.RoundTripper = ru.client
	if kind == baseClient {
		cl := &http.Client{Transport: ru.client, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if rec := ru.recOf(req); rec != nil && rec.out.redirect == redirectRefused {
				return errRedirectRefused
			}
			return nil
		}}
		bottom = roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := cl.Do(req)
			if err != nil {
				return nil, err // a *url.Error, as http.Client returns
			}
			return resp, nil
		})
	}
	// The attempt's number travels to the server in a header of a clone:
	// Base must not modify the request it is given.
	return ru, roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n, _ := httpretry.AttemptFromContext(req.Context())
		out := req.Clone(req.Context())
		out.Header.Set(harnessAttempt, strconv.Itoa(n))
		return bottom.RoundTrip(out)
	})
}

const harnessAttempt = "X-Harness-Attempt"

var errRedirectRefused = errors.New("redirects are not followed")

const (
	redirectFollowed    = 1 // a 303, followed to a 200
	redirectRefused     = 2 // a 303 that CheckRedirect refuses
	redirectUnreachable = 3 // a 303 to a host whose dial is refused, after the request was processed
)

// unreachableHost is where a redirectUnreachable answer points: its dial is
// refused.
const unreachableHost = "unreachable.invalid"

// stop closes the client's idle connections and the server, so that their
// goroutines end.
func (ru *realUpstream) stop() {
	close(ru.done)
	ru.client.CloseIdleConnections()
	ru.srv.Close()
	ru.handlers.Wait()
}

// recOf returns the record of the attempt req belongs to.
func (ru *realUpstream) recOf(req *http.Request) *baseRec {
	n, err := strconv.Atoi(req.Header.Get(harnessAttempt))
	if err != nil {
		return nil
	}
	return ru.u.attempt(callOf(req.URL), n)
}

// dial connects to the server over net.Pipe, or fails as a refused
// connection when the attempt's outcome says so.
func (ru *realUpstream) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, _, _ := net.SplitHostPort(addr); host == unreachableHost {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	if n, ok := httpretry.AttemptFromContext(ctx); ok {
		if rec := ru.u.attemptOfCtx(ctx, n); rec != nil && rec.out.err >= 0 && errKinds[rec.out.err].name == "refused" {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
	}
	client, server := net.Pipe()
	select {
	case ru.ln.conns <- server:
		return client, nil
	case <-ru.ln.done:
		client.Close()
		server.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

// serve plays the outcome of the attempt a request belongs to, and records
// what the server received of it.
func (ru *realUpstream) serve(w http.ResponseWriter, req *http.Request) {
	ru.handlers.Add(1)
	defer ru.handlers.Done()
	if isProbe(req) {
		return // 200, empty
	}
	rec := ru.recOf(req)
	if rec != nil {
		ru.u.mu.Lock()
		rec.served = true
		ru.u.mu.Unlock()
	}
	if rec == nil {
		http.Error(w, "no such attempt", http.StatusTeapot)
		return
	}
	o := rec.out
	if o.redirect != 0 && req.URL.Query().Get("hop") != "" {
		io.Copy(io.Discard, req.Body)
		io.WriteString(w, "redirected")
		return
	}
	if !o.early {
		data, err := io.ReadAll(req.Body)
		ru.u.received(rec, data, err)
	}
	if o.delay > 0 {
		t := time.NewTimer(o.delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		case <-ru.done:
			t.Stop()
			return
		}
	}
	switch {
	case o.err >= 0: // a hang-up, or a refused dial on a connection already open
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		return
	case o.redirect == redirectUnreachable:
		w.Header().Set("Location", "https://"+unreachableHost+req.URL.Path+"?hop=1")
		w.WriteHeader(http.StatusSeeOther)
		return
	case o.redirect != 0:
		w.Header().Set("Location", req.URL.Path+"?hop=1")
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	for k, vs := range o.header(ru.u.r.start) {
		w.Header()[k] = vs
	}
	ru.write(w, req, o)
}

// write writes o's status and body as a server does.
func (ru *realUpstream) write(w http.ResponseWriter, req *http.Request, o *outcome) {
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-req.Context().Done():
			return false
		case <-ru.done:
			return false
		}
	}
	switch o.body {
	case rbEndless, rbSlowEndless:
		// Endless as far as anyone reads (72 KiB, or 1 KiB of the slow
		// one): past that the server stops, since a write to a client
		// gone does not always fail.
		w.WriteHeader(o.status)
		chunk, limit := bytes.Repeat([]byte("x"), 8<<10), 256<<10
		if o.body == rbSlowEndless {
			chunk, limit = chunk[:16], 4<<10
		}
		for sent := 0; sent < limit; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			flush()
			if o.body == rbSlowEndless && !pause(10*ms) {
				return
			}
			if req.Context().Err() != nil {
				return
			}
		}
	case rbTrickleShort, rbTrickleLong:
		content, _ := o.content(0)
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		w.WriteHeader(o.status)
		flush()
		for i := range len(content) {
			if !pause(30 * ms) {
				return
			}
			if _, err := io.WriteString(w, content[i:i+1]); err != nil {
				return
			}
			flush()
		}
	case rbBreaks:
		// Eight bytes announced, three sent: the server closes the
		// connection, and the client's read ends with io.ErrUnexpectedEOF.
		w.Header().Set("Content-Length", "8")
		w.WriteHeader(o.status)
		io.WriteString(w, "abc")
		flush()
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
	default:
		content, _ := o.content(1 << 20)
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		w.WriteHeader(o.status)
		io.WriteString(w, content)
	}
}

// received records a body the server read for attempt rec: net/http may
// send one attempt more than once on its own (a reused connection found
// closed).
func (u *upstream) received(rec *baseRec, data []byte, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	rec.receipts = append(rec.receipts, receipt{data, err})
}

// receipt is one request body as the server received it.
type receipt struct {
	data []byte
	err  error
}

// attemptOfCtx returns the record of attempt n under ctx, the context of a
// dial: the call is the one whose attempt context it is.
func (u *upstream) attemptOfCtx(ctx context.Context, n int) *baseRec {
	call, ok := ctx.Value(callKey{}).(int)
	if !ok {
		return nil
	}
	return u.attempt(call, n)
}

// callKey carries the call's index in its context, for dials.
type callKey struct{}

// pipeListener is a net.Listener whose connections come over a channel.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }

// tracer is an otelhttp-style tracing layer: it installs a ClientTrace of
// its own on each request's context, composed with whatever is there, and
// counts what net/http (or the scripted upstream) told it.
func (u *upstream) tracer(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n, _ := httpretry.AttemptFromContext(req.Context())
		rec := u.attempt(callOf(req.URL), n)
		var mu sync.Mutex
		count := func(p *int) func() {
			return func() {
				mu.Lock()
				*p++
				mu.Unlock()
			}
		}
		var conns, wrote, answered int
		trace := &httptrace.ClientTrace{
			GetConn:              func(string) { count(&conns)() },
			WroteHeaders:         count(&wrote),
			GotFirstResponseByte: count(&answered),
		}
		resp, err := next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if rec != nil {
			mu.Lock()
			rec.traced = [3]int{conns, wrote, answered}
			mu.Unlock()
		}
		return resp, err
	})
}

// signer hashes the body through GetBody before it passes the request on,
// as a request signer (AWS SigV4) does, and fails without passing it on
// when the outcome says so, or when it cannot read the body.
func (u *upstream) signer(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n, _ := httpretry.AttemptFromContext(req.Context())
		rec := u.attempt(callOf(req.URL), n)
		fail := func(err error) (*http.Response, error) {
			if req.Body != nil {
				req.Body.Close()
			}
			rec.unread, rec.signerFailed = true, true
			return nil, err
		}
		if rec.out.err >= 0 && errKinds[rec.out.err].name == "signer" {
			return fail(errors.New("signer: the credentials expired"))
		}
		if u.r.s.signReads && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			rc, err := req.GetBody()
			if err != nil {
				return fail(fmt.Errorf("signer: GetBody: %w", err))
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			rec.signed = data
			if err != nil {
				return fail(fmt.Errorf("signer: reading the body: %w", err))
			}
			rec.signedOK = true
		}
		return next.RoundTrip(req)
	})
}

// layered returns Base's layers over bottom, as the scenario draws them.
func (u *upstream) layered(bottom http.RoundTripper) http.RoundTripper {
	switch u.r.s.layers {
	case layersTrace:
		return u.tracer(bottom)
	case layersSigner:
		return u.signer(bottom)
	case layersBoth:
		return u.tracer(u.signer(bottom))
	}
	return bottom
}

// defectGetBodyBreaks names a library defect the harness reports.
const defectGetBodyBreaks = "library defect (getbody-breaks-attempt)"

// discardLog drops the server's error log (a connection hung up on).
var discardLog = log.New(io.Discard, "", 0)

// checkReceived checks what the server received: every body it read in
// full is the caller's bytes, or the attempt failed; and every body a
// signer read through GetBody is the caller's bytes.
func (r *run) checkReceived(c *callRun, recs []*baseRec) {
	want := string(c.payload())
	if c.spec.clDelta < 0 && !c.spec.clUnknown {
		want = want[:len(want)+c.spec.clDelta] // net/http sends what ContentLength says
	}
	plan := c.spec.bodyPlan(r.effective(c.spec))
	if plan.none() {
		return
	}
	for _, b := range recs {
		for i, rc := range b.receipts {
			if plan.mode == modeOnce && c.spec.body == bodySharedSeek && b.signedOK {
				break // see checkCall: the caller's one stream, read to its end by the signer
			}
			coverage.bodiesChecked.Add(1)
			if rc.err == nil && string(rc.data) != want && b.err == nil { // or the attempt failed
				r.violate("call%d: attempt %d: the server received body %q (receipt %d of %d), the caller's is %q",
					c.spec.idx, b.n, trim(rc.data), i+1, len(b.receipts), want)
			}
		}
		if b.signedOK {
			coverage.bodiesChecked.Add(1)
			coverage.signed.Add(1)
			if string(b.signed) != want {
				r.violate("call%d: attempt %d: the signer read %q through GetBody, the caller's body is %q", c.spec.idx, b.n, trim(b.signed), want)
			}
			// Reading the attempt's GetBody must leave the attempt's own
			// body whole, when nothing is wrong with the caller's.
			sound := c.spec.failAt < 0 && c.spec.clDelta == 0 && !plan.rewindFails()
			if sound && b.err != nil && errors.Is(b.err, httpretry.ErrRequestBody) && !b.callerDone || sound && b.bodyErr != nil && b.ctxCause == nil && !b.callerDone {
				r.violate("%s: call%d: attempt %d: once the signer had read its GetBody, the attempt's own body failed (%s): %v",
					defectGetBodyBreaks, c.spec.idx, b.n, modeNames[plan.mode], safeError(cmp.Or(b.bodyErr, b.err)))
			}
		}
	}
}

// checkTraced checks that a tracing layer under the Transport heard every
// hook the scripted upstream called, composed with the Transport's own.
func (r *run) checkTraced(c *callRun, recs []*baseRec) {
	if r.s.base != baseScripted || !r.s.reach || r.s.layers != layersTrace && r.s.layers != layersBoth {
		return
	}
	for _, b := range recs {
		if b.panicked || b.signerFailed || b.n > successAfter {
			continue
		}
		stage := stageAnswered
		if b.out.err >= 0 || b.out.broken != brokenNone {
			stage = b.out.stage
		}
		if b.err != nil && b.bodyErr != nil {
			stage = stageWritten // the body failed: no answer began
		}
		want := [3]int{}
		for i := range want {
			if stage > i {
				want[i] = 1
			}
		}
		if b.traced != want {
			r.violate("call%d: attempt %d: the tracing layer heard GetConn, WroteHeaders, GotFirstResponseByte %v times, want %v",
				c.spec.idx, b.n, b.traced, want)
		}
	}
}
