package httpretry_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seedhq/httpretry"
)

// effPolicy is the model's view of the policy that applies to one call.
type effPolicy struct {
	invalid       bool // every request fails with ErrInvalidPolicy
	emptyKeys     bool // Keys.New returns "": invalid once a key is needed
	maxAttempts   int
	timeout       time.Duration
	maxRetryAfter time.Duration
	maxReplay     int64
	keysOff       bool
	keyMethods    []string
	keyHeader     string
	quoted        bool
	attemptHeader string
	hedgeDelay    time.Duration
	maxHedges     int
	adaptive      bool // the hedge delay may be learnt, not Hedge.Delay
	overload      bool // an overload control is on: waits before attempts, refusals, state from the first request
	stateful      bool
}

// effective returns the policy that applies to call c, as the docs say it
// is resolved: defaults, then the per-request edits.
func (r *run) effective(c *callSpec) *effPolicy {
	p := &r.s.pol
	e := &effPolicy{
		maxAttempts:   cmp.Or(p.maxAttempts, httpretry.DefaultMaxAttempts),
		timeout:       max(p.attemptTimeout, 0),
		maxRetryAfter: cmp.Or(p.maxRetryAfter, httpretry.DefaultMaxRetryAfter),
		maxReplay:     cmp.Or(p.maxReplay, httpretry.DefaultMaxReplayBytes),
		keyMethods:    []string{"POST", "PUT"},
		keyHeader:     "Idempotency-Key",
		hedgeDelay:    p.hedgeDelay,
		maxHedges:     p.maxHedges,
		adaptive:      p.adaptive != 0,
		overload:      p.overload != overloadNone,
		stateful:      p.budget != budgetNone || p.breaker != 0,
	}
	switch p.keys {
	case keysOff:
		e.keysOff = true
	case keysHeader:
		e.keyHeader = customKeyHeader
	case keysQuoted:
		e.quoted = true
	case keysMethods:
		e.keyMethods = []string{"POST", "PATCH", "DELETE"}
	case keysEmpty:
		e.emptyKeys = true
	}
	if ah := http.CanonicalHeaderKey(p.attemptHeader); ah != "" {
		e.attemptHeader = ah
		if ah == e.keyHeader || ah == "Idempotency-Key" || ah == "X-Idempotency-Key" {
			e.invalid = true
		}
	}
	switch c.override {
	case overrideWithoutRetries:
		e.maxAttempts, e.hedgeDelay = 1, 0
	case overrideAttempts2:
		e.maxAttempts = 2
	case overrideTimeout:
		e.timeout = 31 * ms
	case overrideNoHedge:
		e.hedgeDelay = 0
	case overrideBudget:
		if p.budget != budgetNone {
			e.invalid = true
		}
	case overrideBoth:
		e.maxAttempts, e.hedgeDelay = 2, 0
	}
	if e.maxAttempts <= 1 {
		e.hedgeDelay = 0
	}
	if e.hedgeDelay > 0 {
		e.maxHedges = min(cmp.Or(e.maxHedges, 1), e.maxAttempts-1)
	}
	return e
}

// keyed reports whether h carries an idempotency key under e.
func (e *effPolicy) keyed(h http.Header) bool {
	return h["Idempotency-Key"] != nil || h["X-Idempotency-Key"] != nil || h[e.keyHeader] != nil
}

func idempotent(method string) bool {
	switch method {
	case "", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// bodyPlan is the model's view of how the call's body is sent.
type bodyPlan struct {
	none       bool // no body: always replayable
	replayable bool
	failsFirst bool          // buffering it for replay fails before any attempt
	streamed   bool          // sent once, unbuffered
	buffering  time.Duration // how long reading it for replay takes, before any attempt
}

func (c *callSpec) bodyPlan(e *effPolicy) bodyPlan {
	switch c.body {
	case bodyNone, bodyNoBody:
		return bodyPlan{none: true, replayable: true}
	case bodyGetBody, bodyGetBodySlow, bodyGetBodyBreaks, bodyGetBodyFails:
		return bodyPlan{replayable: c.body != bodyGetBodyFails}
	}
	cl := int64(0)
	if !c.clUnknown {
		cl = int64(c.bodyLen + c.clDelta)
	}
	if e.maxReplay < 0 || cl > e.maxReplay {
		return bodyPlan{streamed: true}
	}
	// Buffered: up to maxReplay+1 bytes are read first, 4 bytes every
	// 7 ms from a slow body.
	need := min(int64(c.bodyLen), e.maxReplay+1)
	var took time.Duration
	if c.body == bodySlow {
		took = time.Duration((need+3)/4) * 7 * ms
	}
	if c.failAt >= 0 && int64(c.failAt) < need {
		return bodyPlan{failsFirst: true}
	}
	if int64(c.bodyLen) > e.maxReplay {
		return bodyPlan{streamed: true, buffering: took}
	}
	if cl > 0 && cl != int64(c.bodyLen) {
		return bodyPlan{failsFirst: true, buffering: took}
	}
	return bodyPlan{replayable: true, buffering: took}
}

// modelClass is the class the documented rules give attempt b of call c;
// false when the rules do not apply (the caller's context had ended, or
// the attempt lost to a hedge).
func (r *run) modelClass(e *effPolicy, b *baseRec) (httpretry.Class, bool) {
	if b.callerDone || b.lost() {
		return 0, false
	}
	status, err, kind := 0, error(nil), classUnknown
	switch {
	case b.timedOut():
		err, kind = httpretry.ErrAttemptTimeout, httpretry.ClassTransient
	case b.err != nil && b.bodyErr != nil:
		err = errors.New("request body")
	case b.err != nil && b.out.broken == brokenBoth:
		err = errors.New("broken")
	case b.err != nil:
		err, kind = b.err, errKinds[b.out.err].class
		switch errKinds[b.out.err].name {
		case "nil-pointer", "panicky":
			err = errors.New("malformed") // what the Transport passes on
		}
	case b.resp == nil:
		err = errors.New("neither")
	default:
		status = b.status
	}
	if fn := classifiers[r.s.pol.classifier]; fn != nil {
		if cl := fn(status, err); cl != httpretry.ClassDefault {
			return cl, true
		}
	}
	if err != nil {
		if kind == classUnknown {
			if r.s.reach {
				return httpretry.ClassTransient, true
			}
			return httpretry.ClassFatal, true
		}
		return kind, true
	}
	if r.s.pol.should && status >= 400 { // the hint speaks about failures only
		switch strings.ToLower(strings.TrimSpace(b.resp.Header.Get(shouldHeader))) {
		case "true":
			return httpretry.ClassNotProcessed, true
		case "false":
			return httpretry.ClassFatal, true
		}
	}
	switch status {
	case 408, 425, 429, 500, 502, 503, 504:
		return httpretry.ClassTransient, true
	case 409:
		if e.keyed(b.header) {
			return httpretry.ClassTransient, true
		}
	}
	if status >= 400 {
		return httpretry.ClassFatal, true
	}
	return httpretry.ClassSuccess, true
}

func retryable(c httpretry.Class) bool {
	return c == httpretry.ClassTransient || c == httpretry.ClassNotProcessed
}

// serverDelay is the wait the response of attempt b asks for, as the
// model reads its hints at the time the answer came; known is false when
// the model cannot tell (a fuzzer's rate-limit value).
func (r *run) serverDelay(b *baseRec) (d time.Duration, ok, known bool) {
	if b.resp == nil {
		return 0, false, true
	}
	now := b.end
	var ra, rl, rs []hdr
	for _, h := range b.out.headers {
		// Names compare as net/http's canonical forms: a response head
		// parsed by net/http carries "Ratelimit", not "RateLimit".
		switch http.CanonicalHeaderKey(h.name) {
		case "Retry-After":
			ra = append(ra, h)
		case http.CanonicalHeaderKey("RateLimit"):
			rl = append(rl, h)
		case http.CanonicalHeaderKey(resetHeader):
			rs = append(rs, h)
		}
	}
	if len(ra) == 1 {
		v := ra[0].text(r.start)
		if d, ok := httpretry.ParseRetryAfter(v, now); ok {
			return d, true, true
		}
	}
	if !r.s.pol.ignoreRL && len(rl) > 0 {
		var vs []string
		for _, h := range rl {
			if h.kind == hdrFuzz {
				return 0, false, false
			}
			vs = append(vs, h.value)
		}
		if d, ok := modelRateLimit(strings.Join(vs, ",")); ok {
			return d, true, true
		}
	}
	if r.s.pol.reset != 0 && len(rs) == 1 {
		if rs[0].kind == hdrFuzz {
			return 0, false, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rs[0].text(r.start)), 10, 64)
		if err == nil && n >= 0 {
			if r.s.pol.reset == 2 {
				n -= now.Unix()
				n = max(n, 0)
			}
			if n <= 1<<32 {
				return time.Duration(n) * time.Second, true, true
			}
		}
	}
	return 0, false, true
}

// modelRateLimit reads the RateLimit values the generator draws from:
// the longest t among exhausted items, t in [0, 2^32].
func modelRateLimit(v string) (time.Duration, bool) {
	best, found := time.Duration(0), false
	for _, item := range strings.Split(v, ",") {
		r, t := int64(-1), int64(-1)
		for _, p := range strings.Split(item, ";")[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 || n > 1<<32 {
				continue
			}
			switch k {
			case "r":
				r = n
			case "t":
				t = n
			}
		}
		if t >= 0 && r <= 0 {
			if d := time.Duration(t) * time.Second; !found || d > best {
				best, found = d, true
			}
		}
	}
	return best, found
}

// check runs every check once the scenario has ended.
func (r *run) check() {
	recs := r.up.records()
	byCall := make([][]*baseRec, len(r.calls))
	for _, b := range recs {
		byCall[b.call] = append(byCall[b.call], b)
	}
	for i, c := range r.calls {
		slices.SortFunc(byCall[i], func(a, b *baseRec) int { return a.n - b.n })
		r.checkCall(c, byCall[i])
	}
	r.checkLevels("after the calls")
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
	if c.panicked != "" {
		bad("RoundTrip panicked: %s", c.panicked)
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
	for i, b := range bodies {
		if n := b.closeCount(); n != 1 {
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
		case re != nil && oc.Stop != re.Reason:
			bad("OnCall's Stop %v differs from the RetryError's %v", oc.Stop, re.Reason)
		case oc.Duration != c.returned.Sub(c.began):
			bad("OnCall's Duration is %v, RoundTrip took %v", oc.Duration, c.returned.Sub(c.began))
		case len(recs) > 0 && oc.Host != "api.example.com:443":
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
	if plan.failsFirst {
		wants = append(wants, httpretry.ErrRequestBody)
	}
	if d := plan.buffering; d > 0 {
		// The caller's deadline or timed cancellation comes while the body
		// is buffered for replay (the others come at an attempt, later).
		if ends := c.ends(spec.cancel == cancelAtTime); !ends.IsZero() && ends.Before(c.began.Add(d)) {
			wants = append(wants, httpretry.ErrRequestBody)
		}
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
		if !plan.none && b.bodyErr == nil && !b.skipped && spec.failAt < 0 && string(b.body) != string(c.payload()) {
			bad("attempt %d: sent body %q, want %q", b.n, b.body, c.payload())
		}
	}
	if (plan.streamed || !plan.replayable && !plan.none) && len(recs) > 1 {
		bad("a body that cannot be replayed was sent %d times", len(recs))
	}

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
			bad("attempt %d (%s): class %v, the rules say %v", a.N, b.out, a.Class, cl)
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
						case rbTrickleShort, rbTrickleLong, rbSlowEndless:
							most += 250 * ms
						}
					}
					if e.overload {
						most = 1 << 62 // pacing and the waiting room wait before the attempt
					}
					if gap := next.start.Sub(b.end); gap < a.Delay || gap > most {
						bad("attempt %d came %v after attempt %d, which was to wait %v", next.n, gap, a.N, a.Delay)
					}
					break
				}
			}
		}
	}
	if !plan.none && !plan.replayable && len(attempts) > 0 && attempts[len(attempts)-1].Retry {
		bad("a retry was decided for a body that cannot be replayed")
	}
	for _, a := range attempts {
		if a.Hedge && (e.hedgeDelay == 0 || !(idempotent(spec.method) || e.keyed(recOf(a.N).header)) || !plan.replayable) {
			bad("attempt %d: a hedge where none belongs", a.N)
		}
	}

	// RoundTrip returns in time: by the deadline, at the cancellation.
	if limit := c.ends(true); !limit.IsZero() && c.returned.After(limit) {
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
	case last.Response == nil:
		expect = -1
	case !last.Retry && last.Stop != httpretry.StopDeadline:
		expect = 1
	default:
		hold, drainFor := b.out.holdable()
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
			stop == httpretry.StopConcurrencyLimit || stop == httpretry.StopRateLimited:
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
	switch {
	case !strings.HasPrefix(want, string(c.read)) && string(c.read) != want:
		bad("the returned body read %q, want %q", trim(c.read), trim([]byte(want)))
	case c.readErr == nil && !endless && string(c.read) != want:
		bad("the returned body ended early: %q of %q", trim(c.read), trim([]byte(want)))
	case c.readErr != nil && c.readCtxDone:
	case c.readErr != nil && b.out.body == rbBreaks && len(c.read) == 3 && errors.Is(c.readErr, syscall.ECONNRESET):
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

// checkLevels checks that every budget is within its bounds.
func (r *run) checkLevels(when string) {
	for _, st := range r.tr.Stats() {
		if st.HasBudget && st.BudgetCapacity > 0 && (st.BudgetAvailable < 0 || st.BudgetAvailable > st.BudgetCapacity) {
			r.violate("budget of %s at %v of %v %s", st.Host, st.BudgetAvailable, st.BudgetCapacity, when)
		}
	}
	r.mu.Lock()
	buckets, ratios := r.buckets, r.ratios
	r.mu.Unlock()
	for _, b := range buckets {
		if n := b.Tokens(); n < 0 || n > tinyBucket.Capacity {
			r.violate("token bucket at %d of %d %s", n, tinyBucket.Capacity, when)
		}
	}
	for _, b := range ratios {
		if avail, capacity := b.Level(); avail < 0 || avail > capacity {
			r.violate("ratio budget at %v of %v %s", avail, capacity, when)
		}
	}
}

// checkBudget checks what budgets were charged: only retries actually
// sent, and, for a single call, exactly the level the model predicts.
func (r *run) checkBudget(byCall [][]*baseRec) {
	p := &r.s.pol
	// The retry budget pays for retries only: hedges have a budget of
	// their own.
	sent := 0 // retries sent
	retries := make([]int, len(r.calls))
	for i, c := range r.calls {
		c.mu.Lock()
		for _, a := range c.attempts {
			if a.N > 1 && !a.Hedge {
				retries[i]++
			}
		}
		c.mu.Unlock()
		sent += retries[i]
	}
	r.mu.Lock()
	ledgers := r.ledgers
	r.mu.Unlock()
	if len(ledgers) > 1 {
		r.violate("the host got %d budgets", len(ledgers))
	}
	for _, l := range ledgers {
		l.mu.Lock()
		charged := l.allowed - l.refunds
		succRetry := l.succRetry
		l.mu.Unlock()
		if charged != sent && !r.uncharged(byCall) {
			r.violate("budget charged for %d retries, %d were sent", charged, sent)
		}
		successes := 0
		for i, c := range r.calls {
			if len(c.onCalls) == 1 && c.onCalls[0].Stop == httpretry.StopSuccess && retries[i] > 0 {
				successes++
			}
		}
		if succRetry != successes {
			r.violate("budget told of %d successes after retries, there were %d", succRetry, successes)
		}
	}
	if len(r.calls) != 1 || (p.budget != budgetDefault && p.budget != budgetTiny && p.budget != budgetLedger) {
		return
	}
	c, recs := r.calls[0], byCall[0]
	if len(c.onCalls) != 1 || c.panicked != "" || len(recs) == 0 {
		return
	}
	cfg := tinyBucket
	if p.budget == budgetDefault {
		cfg = httpretry.TokenBucketConfig{Capacity: 500, RetryCost: 5, TimeoutCost: 10, SuccessCredit: 1}
	}
	cost := func(timeout bool) int {
		if timeout {
			return cfg.TimeoutCost
		}
		return cfg.RetryCost
	}
	// Pair each retry decision with the attempt it sent.
	var decisions []bool // timeout flag of each decision to retry, in order
	hedges := map[int]bool{}
	for _, a := range c.attempts {
		if a.Retry {
			decisions = append(decisions, errors.Is(a.Err, httpretry.ErrAttemptTimeout))
		}
		hedges[a.N] = a.Hedge
	}
	level, lastTimeout, d := cfg.Capacity, false, 0
	for _, b := range recs[1:] {
		if hedges[b.n] {
			continue // paid by the hedge budget
		}
		if d >= len(decisions) {
			r.violate("call0: attempt %d was sent without a decision to retry", b.n)
			return
		}
		level -= cost(decisions[d])
		lastTimeout = decisions[d]
		d++
	}
	stop := c.onCalls[0].Stop
	if stop == httpretry.StopBudget {
		flag := errors.Is(c.attempts[len(c.attempts)-1].Err, httpretry.ErrAttemptTimeout)
		if level >= cost(flag) {
			r.violate("call0: stopped by the budget with %d tokens left, a retry costs %d", level, cost(flag))
		}
	}
	var st *httpretry.HostStats
	for _, s := range r.tr.Stats() {
		if s.Host == "api.example.com:443" {
			st = &s
		}
	}
	if st == nil {
		if level != cfg.Capacity {
			r.violate("call0: retries were charged (level %d) but the host keeps no state", level)
		}
		return
	}
	if stop == httpretry.StopSuccess {
		add := cfg.SuccessCredit
		if retries[0] > 0 {
			add = cost(lastTimeout)
		}
		level = min(level+add, cfg.Capacity)
	}
	coverage.budgetLevels.Add(1)
	if got := int(st.BudgetAvailable); got != level || int(st.BudgetCapacity) != cfg.Capacity {
		r.violate("call0: budget at %d of %v, the model says %d of %d", got, st.BudgetCapacity, level, cfg.Capacity)
	}
}

// uncharged reports whether a retry may have been sent before the host had
// state to charge it to: after an error that a breaker below reported
// (which a classifier may make transient), which is not the host's
// failure and so creates no state.
func (r *run) uncharged(byCall [][]*baseRec) bool {
	for _, recs := range byCall {
		for _, b := range recs {
			if b.out.err >= 0 && errKinds[b.out.err].name == "breaker-below" {
				return true
			}
		}
	}
	return false
}

// checkBreaker checks that no attempt is sent once the breaker has seen
// enough failures to open, when calls do not hedge.
func (r *run) checkBreaker(recs []*baseRec) {
	p := &r.s.pol
	if p.breaker == 0 || p.hedgeDelay > 0 || p.overload != overloadNone {
		return // hedges, and a host with state from its first request, are not modelled
	}
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b *baseRec) int { return a.end.Compare(b.end) })
	// The host gets state, and its breaker, at its first failure. A call
	// loads the state when it starts, or gets it at its own first failure:
	// until then its successes are not counted.
	consecutive, failures, total := 0, 0, 0
	var opened, stateAt time.Time
	hasState := map[int]bool{}
	openedBy := -1
	for i, b := range sorted {
		if !opened.IsZero() {
			if b.end.Equal(opened) && b.call != openedBy {
				return // another call's answer in the same instant: heard first or not
			}
			break
		}
		if i > 0 && sorted[i-1].end.Equal(b.end) && sorted[i-1].call != b.call {
			return // the order in which the breaker heard them is not defined
		}
		e := r.effective(r.calls[b.call].spec)
		cl, ok := r.modelClass(e, b)
		if !ok || (b.err != nil && b.out.err >= 0 && errKinds[b.out.err].name == "breaker-below" && !b.timedOut()) {
			continue // excluded
		}
		failed := retryable(cl) || (cl == httpretry.ClassFatal && (b.err != nil || b.resp == nil || b.timedOut()))
		c := r.calls[b.call]
		if !hasState[b.call] && !stateAt.IsZero() {
			// The call loads the state once its body is buffered.
			loads := c.began.Add(c.spec.bodyPlan(r.effective(c.spec)).buffering)
			if loads.Equal(stateAt) {
				return // whether the call found the state is not defined
			}
			hasState[b.call] = loads.After(stateAt)
		}
		if failed {
			hasState[b.call] = true
			if stateAt.IsZero() {
				stateAt = b.end
			}
		}
		if !hasState[b.call] {
			continue
		}
		total++
		if failed {
			consecutive++
			failures++
		} else {
			consecutive = 0
		}
		// The trip rules are evaluated when a failure is counted.
		switch {
		case !failed:
		case p.breaker <= 3 && consecutive >= p.breaker,
			p.breaker == 4 && total >= 3 && float64(failures) >= 0.5*float64(total):
			opened, openedBy = b.end, b.call
		}
	}
	if opened.IsZero() {
		return
	}
	coverage.breakerOpen.Add(1)
	for _, b := range recs {
		if b.start.After(opened) {
			r.violate("call%d: attempt %d was sent at %v, after the breaker opened at %v", b.call, b.n, b.start.Sub(r.start), opened.Sub(r.start))
		}
	}
}
