package invariants

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seedhq/httpretry"
)

// checkOutcome checks that a response is returned if and only if one was
// received and not retried away, and that it is readable.
func (r *run) checkOutcome(c *callRun, e *effPolicy, recs []*baseRec, attempts []httpretry.Attempt, onCalls []httpretry.Call, recOf func(int) *baseRec) {
	bad := func(format string, args ...any) { r.violate(fmt.Sprintf("call%d: ", c.spec.idx)+format, args...) }
	if len(attempts) == 0 {
		if c.resp != nil {
			bad("a response without any attempt")
		}
		return
	}
	last := attempts[len(attempts)-1]
	if last.Stop == httpretry.StopNone && !last.Retry {
		bad("the last attempt reported (%d) neither stops nor retries", last.N)
		return
	}
	b := recOf(last.N)
	stop := httpretry.StopNone
	if len(onCalls) == 1 {
		stop = onCalls[0].Stop
	}
	if last.Stop != httpretry.StopNone && stop != last.Stop {
		bad("OnCall's Stop %v, the last attempt's %v", stop, last.Stop)
	}
	expect := 0 // 1: a response, -1: an error, 0: either
	switch {
	case c.spec.nested && c.ctxAtReturn != nil:
		// A call of PrepareRetry's runs under the context of the call it
		// prepares a retry for, which ended: when is not modelled.
	case last.Response == nil:
		expect = -1
	case !last.Retry && last.Stop != httpretry.StopDeadline:
		expect = 1
	default:
		hold, drainFor := b.out.holdable()
		if r.s.base != baseScripted && c.spec.method == http.MethodHead {
			hold, drainFor = true, 0 // a real server sends no body to a HEAD
		}
		if b.status == http.StatusSwitchingProtocols {
			hold = false // its body is a connection
		}
		// A drain is cut when the caller's context ends during it; in the
		// very instant it would end, either may come first.
		ends := c.ends(!c.afterDrain)
		cut, unsure := false, false
		if hold && !ends.IsZero() {
			cut = ends.Before(b.end.Add(drainFor))
			unsure = ends.Equal(b.end.Add(drainFor))
		}
		hold = hold && !cut
		if r.s.base != baseScripted && (c.spec.clDelta != 0 || b.out.early) {
			// net/http closes the connection of a request whose body does
			// not match its ContentLength, and the server one whose body it
			// answered before reading (early): the answer's body may break
			// with it while it is drained, held or not, as the goroutines
			// of both ends run (seed 4726467).
			unsure = true
		}
		switch {
		case unsure:
		case !last.Retry: // StopDeadline, either before or after the drain
			if hold {
				expect = 1
			}
		case stop == httpretry.StopDeadline && e.overload:
			// The backoff wait was cut (the retry took the response away),
			// or a pacing wait no longer fit, a refusal: either.
		case stop == httpretry.StopContext || stop == httpretry.StopDeadline:
			expect = -1 // the wait was cut: the retry took the response away
		case stop == httpretry.StopRefused || stop == httpretry.StopBreaker || stop == httpretry.StopThrottled ||
			stop == httpretry.StopConcurrencyLimit || stop == httpretry.StopRateLimited ||
			stop == httpretry.StopNotReplayable && c.spec.bodyPlan(e).rewindFails(),
			stop == httpretry.StopNotReplayable && r.s.base != baseScripted && c.spec.bodyPlan(e).mode == modeCopy:
			// (net/http's write loop may read on after RoundTrip returned,
			// and find that the body breaks or outgrows the copy.)
			// GetBody fails as the retry is about to be sent, after the wait.
			// The response in hand, unless the caller's context ended
			// first (from OnAttempt or PrepareRetry, it did); in the very
			// instant of the refusal, either may come first.
			ended := c.ends(true)
			switch {
			case !ended.IsZero() && (ended.Before(c.returned) || c.afterDrain):
				expect = -1
			case !ended.IsZero() && ended.Equal(c.returned):
			case hold:
				expect = 1
			default:
				expect = -1
			}
		default:
			bad("attempt %d was to be retried, but the call stopped with %v", last.N, stop)
		}
	}
	switch {
	case expect == 1 && c.resp == nil:
		bad("the response of attempt %d (%s) was in hand, yet RoundTrip returned an error: %v", last.N, b.out, safeError(c.err))
	case expect == -1 && c.resp != nil:
		bad("RoundTrip returned a response (%d) although attempt %d, the last, had none to return", c.resp.StatusCode, last.N)
	}
	if c.resp == nil {
		return
	}
	n, ok := attemptOf(c.resp)
	if !ok || n != last.N || c.resp.StatusCode != b.status {
		bad("the response returned (status %d, attempt %d) is not the last attempt's (%d, status %d)", c.resp.StatusCode, n, last.N, b.status)
		return
	}
	if b.status == http.StatusSwitchingProtocols && !c.writable {
		bad("the 101 response's body is no longer an io.Writer")
	}
	// Readable in full: what Base's body holds, or cut by the caller's
	// context or by the server's own failure.
	want, endless := b.out.content(len(c.read))
	if r.s.base != baseScripted && c.spec.method == http.MethodHead {
		want, endless = "", false // a real server sends no body to a HEAD
	}
	switch {
	case !strings.HasPrefix(want, string(c.read)) && string(c.read) != want:
		bad("the returned body read %q, want %q", trim(c.read), trim([]byte(want)))
	case c.readErr == nil && !endless && string(c.read) != want:
		bad("the returned body ended early: %q of %q", trim(c.read), trim([]byte(want)))
	case c.readErr != nil && c.readCtxDone:
	case c.readErr != nil && r.s.base == baseClient && b.status/100 == 3 && c.spec.body != bodyNone && c.spec.body != bodyNoBody:
		// An http.Client closes the request body it was given when the
		// answer is a redirect, while net/http's write loop may still be
		// about to Read it (the Read that finds its end): a body whose
		// Read fails once closed — the caller's reqBody, or the
		// Transport's attempt body — then ends the connection, and the
		// response's body with it (seed 3022, reported as a finding).
	case c.readErr != nil && r.s.base != baseScripted && (c.spec.clDelta != 0 || b.out.early):
		// An answer before the request body was read may end with the
		// connection, when the server gives up on the rest of the body.
		// The caller's body does not match its ContentLength: net/http
		// breaks the connection when it finds out, the response's too.
	case c.readErr != nil && b.out.body == rbBreaks && len(c.read) == 3 &&
		(errors.Is(c.readErr, syscall.ECONNRESET) ||
			r.s.base != baseScripted && (errors.Is(c.readErr, io.ErrUnexpectedEOF) || errors.Is(c.readErr, io.ErrClosedPipe))):
	case c.readErr != nil:
		bad("the returned body of attempt %d (%s) failed after %d bytes: %v", last.N, b.out, len(c.read), c.readErr)
	}
}

func trim(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + fmt.Sprintf("…(%d bytes)", len(b))
	}
	return string(b)
}

// ends returns when the caller's context ended: at its deadline, or when
// the caller cancelled it, if cancelled counts; zero if it never did.
func (c *callRun) ends(cancelled bool) time.Time {
	var at time.Time
	if cancelled {
		at = c.cancelled()
	}
	if c.spec.deadline > 0 && (at.IsZero() || c.began.Add(c.spec.deadline).Before(at)) {
		at = c.began.Add(c.spec.deadline)
	}
	return at
}

// ambiguous reports whether attempt b ended in the same instant as its
// AttemptTimeout or the caller's deadline, where the order of the two in
// the bubble is not defined.
func (r *run) ambiguous(c *callRun, e *effPolicy, b *baseRec) bool {
	if e.timeout > 0 && b.end.Equal(b.start.Add(e.timeout)) {
		return true
	}
	if c.spec.deadline > 0 && b.end.Equal(c.began.Add(c.spec.deadline)) {
		return true
	}
	return false
}

// callerHeader is the header the caller sets, for key decisions.
func callerHeader(spec *callSpec) http.Header {
	h := http.Header{}
	if k := callerKeyHeaders[spec.callerKey]; k != "" {
		h.Set(k, "caller-key-"+strconv.Itoa(spec.idx))
	}
	return h
}

func attemptNumbers(recs []*baseRec) []int {
	var ns []int
	for _, b := range recs {
		ns = append(ns, b.n)
	}
	return ns
}

func safeError(err error) (s string) {
	defer func() {
		if p := recover(); p != nil {
			s = fmt.Sprintf("<Error panicked: %v>", p)
		}
	}()
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func safeIs(err, target error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return errors.Is(err, target)
}
