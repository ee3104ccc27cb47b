package invariants

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
)

// check runs every check once the scenario has ended.
func (r *run) check() {
	recs := r.up.records()
	byCall := make([][]*baseRec, len(r.calls))
	for _, b := range recs {
		byCall[b.call] = append(byCall[b.call], b)
	}
	for i, c := range r.calls {
		if !c.made() {
			continue
		}
		slices.SortFunc(byCall[i], func(a, b *baseRec) int { return a.n - b.n })
		r.checkCall(c, byCall[i])
	}
	r.checkLevels("after the calls")
	r.checkHostBound("after the calls")
	r.checkProtection()
	r.checkPaceProbe()
	r.checkBudget(byCall)
	r.checkBreaker(recs)
	if r.s.logger {
		if out := r.log.String(); strings.Contains(out, "SECRET") || strings.Contains(out, "PASSWORD") {
			r.violate("the log carries a secret of the URL: %s", firstLine(out, "SECRET", "PASSWORD"))
		}
	}
}

func firstLine(s string, needles ...string) string {
	for _, l := range strings.Split(s, "\n") {
		for _, n := range needles {
			if strings.Contains(l, n) {
				return l
			}
		}
	}
	return ""
}

// checkCall checks one call.
func (r *run) checkCall(c *callRun, recs []*baseRec) {
	spec := c.spec
	where := fmt.Sprintf("call%d", spec.idx)
	bad := func(format string, args ...any) { r.violate(where+": "+format, args...) }
	if r.checkPanic(c, recs) {
		return
	}
	e := r.effective(spec)
	plan := spec.bodyPlan(e)

	// Exactly one of a response and an error.
	if (c.resp == nil) == (c.err == nil) {
		bad("RoundTrip returned response %v and error %v", c.resp != nil, c.err)
		return
	}
	// The caller's request is untouched and its bodies closed once each.
	if spec.nilHeader {
		if c.req.Header != nil {
			bad("a nil Header was replaced")
		}
	} else if ch := c.snap.changes(c.req); len(ch) > 0 {
		bad("the caller's request changed: %s", strings.Join(ch, "; "))
	}
	c.mu.Lock()
	bodies, attempts, onCalls := c.bodies, c.attempts, c.onCalls
	c.mu.Unlock()
	if c.stream != nil {
		if n := c.stream.closeCount(); n != 1 && !(n > 1 && r.s.base == baseClient && plan.mode == modeOnce) {
			bad("the caller's live stream was closed %d times, want 1", n)
		}
	}
	for i, b := range bodies {
		if n := b.closeCount(); spec.body == bodySharedSeek && n == 0 {
			// GetBody hands out the caller's one stream again: each attempt
			// that net/http is given closes it, as without a Transport.
			bad("the caller's request body, which GetBody returns again, was never closed")
		} else if n != 1 && spec.body != bodySharedSeek && !(n == 0 && r.panicked()) &&
			!(n > 1 && r.s.base == baseClient && plan.mode == modeOnce) {
			// (An http.Client that follows a redirect closes the body it
			// was given again, when the Transport passed the caller's own.)
			// (A Base that panicked holding a body never closed it: see checkUnclosed.)
			what := "the caller's request body"
			if i > 0 {
				what = fmt.Sprintf("the body GetBody returned for a retry (%d of %d)", i, len(bodies)-1)
			}
			bad("%s was closed %d times, want 1", what, n)
		}
	}
	// The error is a *RetryError that behaves.
	var re *httpretry.RetryError
	if c.err != nil {
		var ok bool
		if re, ok = c.err.(*httpretry.RetryError); !ok {
			bad("the error is a %T, not a *RetryError: %v", c.err, c.err)
			return
		}
		if msg := safeError(c.err); !strings.HasPrefix(msg, "httpretry: ") {
			bad("error text %q lacks the httpretry: prefix", msg)
		}
		if re.Attempts != len(recs) {
			bad("RetryError.Attempts is %d, Base saw %d attempts", re.Attempts, len(recs))
		}
	}
	// One OnCall, telling what RoundTrip returned.
	if len(onCalls) != 1 {
		bad("OnCall was called %d times, want 1", len(onCalls))
	} else {
		oc := onCalls[0]
		hedges := 0
		for _, a := range attempts {
			if a.Hedge {
				hedges++
			}
		}
		switch {
		case oc.Response != c.resp || oc.Err != c.err:
			bad("OnCall reported response %p error %v, RoundTrip returned %p %v", oc.Response, oc.Err, c.resp, c.err)
		case oc.Attempts != len(recs):
			bad("OnCall reported %d attempts, Base saw %d", oc.Attempts, len(recs))
		case oc.Hedges != hedges:
			bad("OnCall reported %d hedges, OnAttempt %d", oc.Hedges, hedges)
		case re != nil && oc.Stop != re.Stop:
			bad("OnCall's Stop %v differs from the RetryError's %v", oc.Stop, re.Stop)
		case oc.Duration != c.returned.Sub(c.began):
			bad("OnCall's Duration is %v, RoundTrip took %v", oc.Duration, c.returned.Sub(c.began))
		case len(recs) > 0 && oc.Host != spec.hostKey():
			bad("OnCall's Host is %q", oc.Host)
		}
	}

	// Calls that must fail before any attempt.
	// (Which comes first, when several apply, is not specified.)
	var wants []error
	if spec.nilHeader {
		wants = append(wants, httpretry.ErrInvalidRequest)
	}
	if e.invalid {
		wants = append(wants, httpretry.ErrInvalidPolicy)
	}
	if spec.cancel == cancelBefore {
		wants = append(wants, context.Canceled)
	}
	if e.emptyKeys && !e.keysOff && slices.Contains(e.keyMethods, cmpOr(spec.method, "GET")) && !e.keyed(callerHeader(spec)) {
		wants = append(wants, httpretry.ErrInvalidPolicy)
	}
	if len(wants) > 0 {
		if c.err == nil || !slices.ContainsFunc(wants, func(w error) bool { return errors.Is(c.err, w) }) || len(recs) != 0 {
			bad("want one of %v before any attempt; got %d attempts, error %v", wants, len(recs), c.err)
		}
		return
	}

	// Attempts: numbered 1..k, at most MaxAttempts, one OnAttempt each.
	if len(recs) > e.maxAttempts {
		bad("%d attempts, MaxAttempts is %d", len(recs), e.maxAttempts)
	}
	for i, b := range recs {
		if b.n != i+1 {
			bad("Base saw attempts numbered %v", attemptNumbers(recs))
			break
		}
	}
	seen := map[int]int{}
	for _, a := range attempts {
		seen[a.N]++
	}
	for _, b := range recs {
		if seen[b.n] != 1 {
			bad("attempt %d: OnAttempt was called %d times, want 1", b.n, seen[b.n])
		}
		delete(seen, b.n)
	}
	for n := range seen {
		bad("OnAttempt reported attempt %d, which Base never saw", n)
	}
	recOf := func(n int) *baseRec {
		if n >= 1 && n <= len(recs) && recs[n-1].n == n {
			return recs[n-1]
		}
		return nil
	}

	// What each attempt carried.
	ck := callerHeader(spec)
	needsKey := !e.keysOff && slices.Contains(e.keyMethods, cmpOr(spec.method, "GET")) && !e.keyed(ck)
	var key string
	hedged := map[int]bool{}
	for _, a := range attempts {
		hedged[a.N] = a.Hedge
	}
	// retryRound reports whether attempt n belongs to a round that a retry
	// began: it or the attempt its hedges went alongside is not the first.
	retryRound := func(n int) bool {
		for n > 1 && hedged[n] {
			n--
		}
		return n > 1
	}
	for _, b := range recs {
		if h := callerKeyHeaders[spec.callerKey]; h != "" && e.keyed(http.Header{h: {"x"}}) {
			if v := b.header.Values(h); len(v) != 1 || v[0] != ck.Get(h) {
				bad("attempt %d: the caller's key %s became %q", b.n, h, v)
			}
		}
		switch v := b.header.Values(e.keyHeader); {
		case needsKey && (len(v) != 1 || v[0] == ""):
			bad("attempt %d: want one key in %s, got %q", b.n, e.keyHeader, v)
		case needsKey && key == "":
			key = v[0]
			if e.quoted && !(strings.HasPrefix(key, `"`) && strings.HasSuffix(key, `"`) && len(key) > 2) {
				bad("attempt %d: key %q is not quoted", b.n, key)
			}
		case needsKey && v[0] != key:
			bad("attempt %d: key %q, attempt 1 had %q", b.n, v[0], key)
		case !needsKey && ck.Get(e.keyHeader) == "" && len(v) > 0:
			bad("attempt %d: a key %q was added where none belongs", b.n, v)
		}
		if e.attemptHeader != "" && b.header.Get(e.attemptHeader) != strconv.Itoa(b.n) {
			bad("attempt %d: %s is %q", b.n, e.attemptHeader, b.header.Get(e.attemptHeader))
		}
		edited := r.s.pol.prepare == prepareEdit && retryRound(b.n) // a retry round's hedges too
		if got := b.header.Get("X-Retry-Of") != ""; got != edited {
			bad("attempt %d: PrepareRetry's edit present %v, want %v", b.n, got, edited)
		}
		if got := b.header.Get("X-Caller") == "yes"; got == edited {
			bad("attempt %d: the caller's X-Caller header present %v", b.n, got)
		}
		if b.method != cmpOr(spec.method, "GET") {
			bad("attempt %d: method %q", b.n, b.method)
		}
		// Every attempt sends the whole body, as far as it could be read.
		// (With one attempt the caller's body and GetBody pass through as
		// they are: an azcore-style GetBody that a signer reads leaves the
		// one stream at its end, as it would without a Transport.)
		shared := plan.mode == modeOnce && spec.body == bodySharedSeek && b.signedOK
		if !plan.none() && b.bodyErr == nil && !b.skipped && !b.unread && !b.panicked && r.s.base == baseScripted && !shared {
			coverage.bodiesChecked.Add(1)
			if string(b.body) != string(c.payload()) {
				bad("attempt %d: sent body %q, want %q", b.n, b.body, c.payload())
			}
		}
		if want := plan.attemptGetBody(spec); b.getBody != want && !plan.none() {
			bad("attempt %d: its request has a GetBody %v, want %v (body sent as %s)", b.n, b.getBody, want, modeNames[plan.mode])
		}
	}
	if plan.mode == modeOnce && len(recs) > 1 {
		bad("a body that cannot be replayed was sent %d times", len(recs))
	}
	r.checkRewind(c, plan, recs)
	r.checkReceived(c, recs)
	r.checkTraced(c, recs)

	// An unkeyed request of a non-idempotent method is never sent again
	// after an attempt that the server may have processed.
	unkeyed := !idempotent(spec.method)
	for _, b := range recs {
		if e.keyed(b.header) {
			unkeyed = false
		}
	}
	if unkeyed {
		for i := 1; i < len(recs); i++ {
			prev, next := recs[i-1], recs[i]
			cl, ok := r.modelClass(e, prev)
			if r.realError(prev) && !prev.served {
				ok, cl = true, httpretry.ClassNotProcessed // the server never saw it
			}
			if next.start.Before(prev.end) {
				bad("unkeyed %s: attempt %d was sent while attempt %d was in flight", spec.method, next.n, prev.n)
			} else if !ok || cl != httpretry.ClassNotProcessed {
				bad("unkeyed %s: attempt %d was sent after attempt %d (%s), which may have been processed", spec.method, next.n, prev.n, prev.out)
			}
		}
	}

	// Each OnAttempt record agrees with what Base saw.
	for i, a := range attempts {
		b := recOf(a.N)
		if b == nil {
			continue
		}
		if (a.Response == nil) == (a.Err == nil) {
			bad("attempt %d: OnAttempt has response %v and error %v", a.N, a.Response != nil, a.Err)
		}
		if a.Retry && (a.Stop != httpretry.StopNone || a.Delay < 0 || a.DelaySource == httpretry.DelayNone) {
			bad("attempt %d: Retry with Stop %v, Delay %v, source %v", a.N, a.Stop, a.Delay, a.DelaySource)
		}
		if !a.Retry && (a.Delay != 0 || a.DelaySource != httpretry.DelayNone) {
			bad("attempt %d: no retry, but Delay %v from %v", a.N, a.Delay, a.DelaySource)
		}
		if a.Stop != httpretry.StopNone && i != len(attempts)-1 {
			bad("attempt %d: Stop %v on an attempt reported before others", a.N, a.Stop)
		}
		// Attempts are timed from sending to the answer: a Duration
		// longer than Base took means the answer waited to be looked at.
		if a.Response != nil || (!a.Lost && !b.callerDone && a.Class != httpretry.ClassFatal) {
			if a.Duration != b.end.Sub(b.start) {
				bad("attempt %d: Duration %v, Base answered in %v", a.N, a.Duration, b.end.Sub(b.start))
			}
		}
		// A hedge goes out Hedge.Delay after the attempt before it, or,
		// when the hedge budget refused it then, once more a delay later.
		if prev := recOf(a.N - 1); a.Hedge && prev != nil && a.N > 1 && !e.adaptive {
			if gap := b.start.Sub(prev.start); gap != e.hedgeDelay && gap != 2*e.hedgeDelay {
				bad("attempt %d: a hedge sent %v after attempt %d, Hedge.Delay is %v", a.N, gap, a.N-1, e.hedgeDelay)
			}
		}
		if a.Response != nil {
			switch {
			case b.timedOut():
				bad("attempt %d: a response that came after AttemptTimeout fired was kept", a.N)
			case a.Response != b.resp:
				bad("attempt %d: OnAttempt's response is not the one Base returned", a.N)
			}
		}
		if cl, ok := r.modelClass(e, b); ok && !a.Lost && a.Class != cl && !r.ambiguous(c, e, b) {
			if c.polluted(a.N) {
				r.violate("%s: call%d: attempt %d (%s): class %v, the rules say %v: a call made under its context before it was sent (PrepareRetry's) counted as its progress",
					defectProgressPolluted, spec.idx, a.N, b.out, a.Class, cl)
			} else {
				bad("attempt %d (%s): class %v, the rules say %v", a.N, b.out, a.Class, cl)
			}
		}
		if b.timedOut() && !a.Lost && !b.callerDone && !errors.Is(a.Err, httpretry.ErrAttemptTimeout) && !r.ambiguous(c, e, b) {
			bad("attempt %d: cut by AttemptTimeout, but its error is %v", a.N, a.Err)
		}
		// Server-requested waits are obeyed, and bounded.
		if a.Response != nil {
			sd, ok, known := r.serverDelay(b)
			switch {
			case !known:
			case a.Retry && ok && sd > e.maxRetryAfter:
				bad("attempt %d: retried although the server asked for %v, above MaxRetryAfter %v", a.N, sd, e.maxRetryAfter)
			case a.Retry && ok && a.Delay < sd:
				bad("attempt %d: waits %v, the server asked for %v", a.N, a.Delay, sd)
			case a.Stop == httpretry.StopRetryAfter && !(ok && sd > e.maxRetryAfter):
				bad("attempt %d: stopped for Retry-After, but the server asked for %v (%v)", a.N, sd, ok)
			}
		}
		if a.Retry {
			limit := backoffs[r.s.pol.backoff].max
			if a.DelaySource != httpretry.DelayBackoff {
				limit = max(limit, e.maxRetryAfter+e.maxRetryAfter/10)
			}
			if a.Delay > limit {
				bad("attempt %d: delay %v above every bound (%v)", a.N, a.Delay, limit)
			}
			// The next attempt that is not a hedge waits for it, and no
			// longer, but for draining a slow body first.
			for _, next := range recs {
				if next.n > a.N && !hedged[next.n] {
					most := a.Delay
					if a.Response != nil {
						switch b.out.body {
						case rbTrickleShort, rbTrickleLong, rbSlowEndless, rbNopClose:
							most += 250 * ms
						}
					}
					if r.s.base != baseScripted {
						// Before a rewind the retry waits, up to a second,
						// for net/http's write loop to leave a Read of the
						// previous attempt's body (a server that answered
						// before it read the body).
						most += time.Second
					}
					if e.overload || r.s.pol.prepare == prepareNested {
						// Pacing and the waiting room wait before the
						// attempt; a PrepareRetry that makes a call first
						// takes that call's time.
						most = 1 << 62
					}
					if gap := next.start.Sub(b.end); gap < a.Delay || gap > most {
						bad("attempt %d came %v after attempt %d, which was to wait %v", next.n, gap, a.N, a.Delay)
					}
					break
				}
			}
		}
	}
	for _, a := range attempts {
		if r.s.base != baseScripted && plan.mode == modeCopy {
			break // how much of the body net/http read is not known
		}
		if b := recOf(a.N); a.Retry && b != nil && !plan.replayableAfter(b, recs) {
			bad("attempt %d: a retry was decided for a body that cannot be replayed (sent as %s)", a.N, modeNames[plan.mode])
		}
	}
	for _, a := range attempts {
		if a.Hedge && (e.hedgeDelay == 0 || !(idempotent(spec.method) || e.keyed(recOf(a.N).header)) || !plan.hedgeable()) {
			bad("attempt %d: a hedge where none belongs", a.N)
		}
	}

	// RoundTrip returns in time: by the deadline, at the cancellation.
	limit := c.ends(true)
	slowBody := spec.body == bodySlow || spec.body == bodyStream || spec.body == bodyGetBodySlow || spec.body == bodySeekSlow
	if slowBody {
		// A Base returns once its reader of the body leaves the body's
		// Read, which pauses 7 ms: net/http's client's write loop, and
		// the scripted upstream's reader alike, when the cancellation
		// finds it inside that Read. Which it finds is the scheduler's
		// choice (a full .ci/run of stop 35, seed 14289: 7 ms late; not seen
		// again in 8 runs of the seed).
		limit = limit.Add(7 * ms)
	}
	if r.s.layers >= layersSigner && r.s.signReads && slowBody {
		limit = limit.Add(time.Hour) // the signer reads the whole body first, whatever the context says
	}
	if !c.ends(true).IsZero() && c.returned.After(limit) {
		bad("RoundTrip returned %v after the caller's context ended", c.returned.Sub(limit))
	}
	// Whenever the caller's context ended, the error says so.
	if c.err != nil && c.ctxAtReturn != nil && (spec.cancel != cancelAtAttempt || e.hedgeDelay == 0) {
		if !safeIs(c.err, c.ctxAtReturn) {
			bad("the caller's context ended (%v), but errors.Is(err, it) is false: %v", c.ctxAtReturn, safeError(c.err))
		}
		if errors.Is(c.ctxAtReturn, context.DeadlineExceeded) && !os.IsTimeout(c.err) {
			bad("the caller's deadline passed, but os.IsTimeout(err) is false: %v", safeError(c.err))
		}
	}

	r.checkOutcome(c, e, recs, attempts, onCalls, recOf)
	if len(onCalls) == 1 {
		r.checkPrepared(c, e, attempts, onCalls[0].Stop)
	}

	// Every body Base handed out was closed exactly once: by the
	// Transport, or, for the one returned, by the caller after reading it.
	for _, b := range recs {
		if b.respBody != nil {
			if n := b.respBody.Closes(); n != 1 {
				bad("the response body of attempt %d (%s) was closed %d times, want 1", b.n, b.out, n)
			}
		}
	}
	r.cover(recs, attempts, c)
}

// checkPrepared checks when PrepareRetry ran: once for each retry whose
// wait is over, whose body could be rewound, and which the refusals that
// cost nothing (an open breaker, the throttle) let through; so also for a
// retry that the pacer, the concurrency limit or a half-open breaker then
// refused (the pipeline's order, attempt.go), and never for a hedge.
func (r *run) checkPrepared(c *callRun, e *effPolicy, attempts []httpretry.Attempt, stop httpretry.StopReason) {
	if r.s.pol.prepare == prepareNone || len(attempts) == 0 {
		return
	}
	c.mu.Lock()
	got := c.prepared
	c.mu.Unlock()
	sent := 0
	for _, a := range attempts {
		if a.N > 1 && !a.Hedge {
			sent++
		}
	}
	least, most := sent, sent
	if attempts[len(attempts)-1].Retry { // the retry decided last was not sent
		switch stop {
		case httpretry.StopRefused, httpretry.StopRateLimited, httpretry.StopConcurrencyLimit:
			least, most = sent+1, sent+1 // refused by PrepareRetry itself, or by a wait after it
		case httpretry.StopBreaker:
			most = sent + 1 // open (before it) or half-open with its trials out (after it)
		case httpretry.StopContext, httpretry.StopDeadline:
			if e.overload || r.s.pol.prepare == prepareCancel {
				most = sent + 1 // the backoff wait, or a wait for admission after PrepareRetry
			}
		}
	}
	coverage.prepared.Add(1)
	if got < least || got > most {
		r.violate("call%d: PrepareRetry ran %d times for %d retries sent and a last one that stopped with %v; want %d to %d",
			c.spec.idx, got, sent, stop, least, most)
	}
}
