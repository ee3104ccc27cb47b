package invariants

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"github.com/seedhq/httpretry"
)

// Panics in user code: Base (its RoundTrip, plain or on a hedge's
// goroutine, and the Read and Close of a response body it returned),
// Classify, PrepareRetry, and the Transport's OnAttempt and OnCall hooks. A panic must reach the goroutine of the
// caller whose call ran that code, with the same value, and never end the
// process; whatever the attempt held is released (see checkHeld).
//
// The harness can only recover a panic on a goroutine it controls. So the
// fakes panic only where a recover waits for it: on a caller's goroutine
// (under run.do), or in Base's RoundTrip on a hedge's goroutine, which the
// Transport documents that it recovers. Anywhere else the panic would end
// the test binary: that is reported as a violation, and the fake returns
// normally instead.
const (
	panicNone      = iota
	panicRoundTrip // Base's RoundTrip panics, before it read the body
	panicAfterBody // ... after it read and closed the body
	panicBodyRead  // the Read of a response body Base returned panics
	panicBodyClose // its Close panics, after closing the body
	panicClassify  // Policy.Classify panics
	panicPrepare   // Policy.PrepareRetry panics
	panicOnAttempt // the Transport's OnAttempt panics on attempt n's report
	panicOnCall    // its OnCall panics

	panicLast = panicOnCall
)

var panicNames = []string{"none", "RoundTrip", "RoundTrip-after-body", "body-Read", "body-Close", "Classify", "PrepareRetry", "OnAttempt", "OnCall"}

// panicSpec is where a scenario panics: at attempt n of call 0.
type panicSpec struct {
	kind int
	n    int
}

// panicValue is what the fakes panic with: a value that == compares, so
// that the caller's recover is seen to get the very value.
type panicValue struct {
	seed uint64
	kind int
	n    int
}

// thrownPanic is a panic a fake threw.
type thrownPanic struct {
	v         panicValue
	hedge     bool // on a hedge's goroutine
	abandoned bool // the caller's context, or the attempt's (another answered first), had ended by then
}

func (g gen) panicSpec() panicSpec {
	if !g.chance(0.06) {
		return panicSpec{}
	}
	return panicSpec{kind: 1 + g.weighted(3, 1, 2, 2, 2, 2, 2, 1), n: 1 + g.r.IntN(3)}
}

// panics is what a run knows of the panics of its user code.
type panics struct {
	mu     sync.Mutex
	thrown map[int]thrownPanic // by call: the value a fake panicked with
	caught map[int]any         // by call: the value its caller recovered
}

// throw panics with the scenario's value for call, if it is safe to:
// else it reports the panic that would have ended the process, and
// returns.
func (r *run) throw(call, kind, n int) { r.throwIn(context.Background(), call, kind, n) }

// throwIn is throw for Base's RoundTrip of an attempt whose context is ctx
// (Background for a panic outside an attempt).
func (r *run) throwIn(ctx context.Context, call, kind, n int) {
	v := panicValue{r.s.seed, kind, n}
	if !recoverable() {
		coverage.panicsLost.Add(1)
		r.violate("%s: call%d: %s panicked on a goroutine of the Transport's, beyond any recover: the panic would end the process\n%s",
			defectPanicOffCaller, call, panicNames[kind], shortStack())
		return
	}
	r.panics.mu.Lock()
	if r.panics.thrown == nil {
		r.panics.thrown = map[int]thrownPanic{}
	}
	abandoned := r.calls[call].ctx.Err() != nil || ctx.Err() != nil
	r.panics.thrown[call] = thrownPanic{v, !onCallerGoroutine(), abandoned}
	r.panics.mu.Unlock()
	panic(v)
}

// defectPanicOffCaller names a library defect the harness reports.
const defectPanicOffCaller = "library defect (panic-off-caller)"

// recoverable reports whether a panic here reaches a recover: the calling
// goroutine is a caller's (run.do is on its stack), or a hedge's, whose
// panic in Base the Transport recovers.
func recoverable() bool {
	st := ownStack()
	return onCallerGoroutine() || strings.Contains(st, "httpretry.(*round).launch.func1(") ||
		strings.Contains(st, "httpretry.drain.func") || strings.Contains(st, "httpretry.releaseAbandoned(")
}

func onCallerGoroutine() bool { return strings.Contains(ownStack(), "/internal/invariants.(*run).do(") }

func ownStack() string {
	buf := make([]byte, 64<<10)
	return string(buf[:runtime.Stack(buf, false)])
}

func shortStack() string {
	buf := make([]byte, 8<<10)
	lines := strings.Split(string(buf[:runtime.Stack(buf, false)]), "\n")
	return "\t\t" + strings.Join(lines[:min(len(lines), 15)], "\n\t\t")
}

// caught records the value call's caller recovered.
func (r *run) caught(call int, p any) {
	r.panics.mu.Lock()
	defer r.panics.mu.Unlock()
	if r.panics.caught == nil {
		r.panics.caught = map[int]any{}
	}
	r.panics.caught[call] = p
}

// panicAt reports whether the fake of kind panics for attempt n of call
// (never for a probe of checkHeld's, whose path names no call: see
// wrapHooks).
func (r *run) panicAt(kind, call, n int) bool {
	return r.s.panic.kind == kind && call == 0 && n == r.s.panic.n
}

// panickyBody is a response body whose Read or Close panics.
type panickyBody struct {
	io.ReadCloser
	r          *run
	call, kind int
	n          int
}

func (b *panickyBody) Read(p []byte) (int, error) {
	if b.kind == panicBodyRead {
		b.r.throw(b.call, b.kind, b.n)
	}
	return b.ReadCloser.Read(p)
}

func (b *panickyBody) Close() error {
	err := b.ReadCloser.Close()
	if b.kind == panicBodyClose {
		b.r.throw(b.call, b.kind, b.n)
	}
	return err
}

// Closes counts the closes of the body under it.
func (b *panickyBody) Closes() int {
	if cc, ok := b.ReadCloser.(closeCounter); ok {
		return cc.Closes()
	}
	return 1
}

// panicky wraps resp's body when attempt n of call is to panic in it.
func (r *run) panicky(resp *http.Response, call, n int) {
	if resp == nil || resp.Body == nil {
		return
	}
	for _, kind := range []int{panicBodyRead, panicBodyClose} {
		if r.panicAt(kind, call, n) {
			pb := &panickyBody{ReadCloser: resp.Body, r: r, call: call, kind: kind, n: n}
			if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
				resp.Body = switchedPanicky{pb, rw}
			} else {
				resp.Body = pb
			}
		}
	}
}

// switchedPanicky keeps a 101's body an io.Writer.
type switchedPanicky struct {
	*panickyBody
	w io.Writer
}

func (s switchedPanicky) Write(p []byte) (int, error) { return s.w.Write(p) }

// wrapHooks makes the policy's Classify and PrepareRetry panic where the
// scenario says.
func (r *run) wrapHooks(pol *httpretry.Policy) {
	switch r.s.panic.kind {
	case panicClassify:
		inner := pol.Classify
		pol.Classify = func(req *http.Request, resp *http.Response, err error) httpretry.Class {
			if n, _ := httpretry.AttemptFromContext(req.Context()); !isProbe(req) && r.panicAt(panicClassify, callOf(req.URL), n) {
				r.markPanicked(callOf(req.URL), n)
				r.throw(callOf(req.URL), panicClassify, n)
			}
			if inner == nil {
				return httpretry.ClassDefault
			}
			return inner(req, resp, err)
		}
	case panicPrepare:
		inner := pol.PrepareRetry
		pol.PrepareRetry = func(prev httpretry.Attempt, next *http.Request) error {
			if n, _ := httpretry.AttemptFromContext(next.Context()); r.panicAt(panicPrepare, callOf(next.URL), n) {
				r.throw(callOf(next.URL), panicPrepare, n)
			}
			if inner == nil {
				return nil
			}
			return inner(prev, next)
		}
	}
}

// markPanicked notes that attempt n of call ended in a panic, which the
// breaker does not count.
func (r *run) markPanicked(call, n int) {
	for _, b := range r.up.records() {
		if b.call == call && b.n == n {
			b.panicked = true
		}
	}
}

// checkPanic checks a call whose user code panicked, or that panicked:
// the value the fake threw is the one the caller recovered, and the
// attempts released what they held. It reports whether the call panicked.
func (r *run) checkPanic(c *callRun, recs []*baseRec) bool {
	idx := c.spec.idx
	r.panics.mu.Lock()
	tp, threw := r.panics.thrown[idx]
	caught, got := r.panics.caught[idx]
	r.panics.mu.Unlock()
	thrown := tp.v
	bad := func(format string, args ...any) { r.violate(fmt.Sprintf("call%d: ", idx)+format, args...) }
	switch {
	case !threw && c.panicked != "":
		bad("RoundTrip panicked: %s", c.panicked)
		return true
	case !threw:
		return false
	case !got && tp.hedge && c.panicked == "":
		// Base panicked on a goroutine of the Transport's once the
		// caller stopped waiting for it: a hedge whose round was
		// abandoned (another attempt answered first, or the caller's
		// context ended), a discarded body whose drain ran out of time, a
		// body closed by the reaper. Such a panic has no caller left to
		// reach (it is logged). The call returned: it is checked as any
		// other.
		r.checkUnclosed(c, thrown)
		return false
	case !got:
		bad("the %s panic (%v) never reached the caller's goroutine", panicNames[thrown.kind], thrown)
		return true
	case caught != any(thrown):
		bad("the caller recovered %v, the %s panic was %v", caught, panicNames[thrown.kind], thrown)
	}
	// What the attempts held is released: every response body closed
	// once, the caller's body at most once (Base may have panicked
	// holding it), nothing left in flight (checkHeld).
	for _, b := range recs {
		if b.respBody != nil {
			if n := b.respBody.Closes(); n != 1 {
				bad("after the %s panic, the response body of attempt %d was closed %d times, want 1", panicNames[thrown.kind], b.n, n)
			}
		}
	}
	c.mu.Lock()
	bodies := c.bodies
	c.mu.Unlock()
	for _, b := range bodies {
		if n := b.closeCount(); n > 1 && c.spec.body != bodySharedSeek {
			bad("after the %s panic, a request body was closed %d times", panicNames[thrown.kind], n)
		}
	}
	r.checkUnclosed(c, thrown)
	coverage.panics.Add(1)
	coverage.panicked[thrown.kind].Add(1)
	if tp.hedge {
		coverage.hedgePanics.Add(1)
	}
	return true
}

// checkUnclosed checks that the caller's body was closed after Base
// panicked holding its attempt's reader of it, when the Transport owns the
// caller's body (it replays it: GetBody, Seek or a copy), and closes it if
// not, so that a live stream's writer ends. A body passed through as it
// is (one attempt allowed, or too large) is Base's to close.
func (r *run) checkUnclosed(c *callRun, thrown panicValue) {
	if thrown.kind != panicRoundTrip {
		return
	}
	if !c.spec.bodyPlan(r.effective(c.spec)).sentBody() {
		if c.stream != nil && c.stream.closeCount() == 0 {
			c.stream.Close() // let the writer end
		}
		return
	}
	c.mu.Lock()
	bodies, stream := c.bodies, c.stream
	c.mu.Unlock()
	var caller io.ReadCloser
	closes := 1
	switch {
	case stream != nil:
		caller, closes = stream, stream.closeCount()
	case len(bodies) > 0:
		caller, closes = bodies[0], bodies[0].closeCount()
	}
	if closes == 0 {
		r.violate("%s: call%d: Base panicked holding the request body of attempt %d, and the caller's body (%s) was never closed",
			defectPanicBodyUnclosed, c.spec.idx, thrown.n, bodyNames[c.spec.body])
		caller.Close()
	}
}

// defectPanicBodyUnclosed names a library defect the harness reports.
const defectPanicBodyUnclosed = "library defect (panic-body-unclosed)"

// panicked reports whether user code panicked in the scenario: the
// attempts it cut short are not modelled one by one.
func (r *run) panicked() bool {
	r.panics.mu.Lock()
	defer r.panics.mu.Unlock()
	return len(r.panics.thrown) > 0
}
