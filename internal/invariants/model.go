package invariants

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
)

// The model: what the documented rules say of a policy, an attempt's
// class, what the breaker counts and how long a server asks to wait.

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

// The defaults a zero Policy field means, as Policy's docs give them: the
// model keeps its own copy, so that a changed default in the code is a
// violation, not a silent change of the model.
const (
	defaultMaxAttempts    = 4
	defaultMaxRetryAfter  = 60 * time.Second
	defaultMaxReplayBytes = 1 << 20
)

// effective returns the policy that applies to call c, as the docs say it
// is resolved: defaults, then the per-request edits.
func (r *run) effective(c *callSpec) *effPolicy {
	p := &r.s.pol
	e := &effPolicy{
		maxAttempts:   cmp.Or(p.maxAttempts, defaultMaxAttempts),
		timeout:       max(p.attemptTimeout, 0),
		maxRetryAfter: cmp.Or(p.maxRetryAfter, defaultMaxRetryAfter),
		maxReplay:     cmp.Or(p.maxReplay, defaultMaxReplayBytes),
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

// modelClass is the class the documented rules give attempt b of call c;
// false when the rules do not apply (the caller's context had ended, or
// the attempt lost to a hedge).
func (r *run) modelClass(e *effPolicy, b *baseRec) (httpretry.Class, bool) {
	if b.callerDone || b.lost() || b.panicked {
		return 0, false
	}
	if r.realError(b) {
		return 0, false // what a real net/http client reports is not modelled
	}
	me := r.attemptError(e, b)
	if fn := classifiers[r.s.pol.classifier]; fn != nil {
		if cl := fn(me.status, me.err); cl != httpretry.ClassDefault {
			return cl, true
		}
	}
	if me.err != nil {
		if me.kind == classUnknown {
			return r.progressClass(b, me.progress), true
		}
		return me.kind, true
	}
	status := me.status
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
		// Transient only once the key may have been sent before: the
		// caller set it, or an earlier attempt of the call carried it.
		if e.keyed(b.header) && (e.keyed(callerHeader(r.calls[b.call].spec)) || b.n > 1) {
			return httpretry.ClassTransient, true
		}
	}
	if status >= 400 {
		return httpretry.ClassFatal, true
	}
	return httpretry.ClassSuccess, true
}

// modelErr is the model's view of how an attempt ended.
type modelErr struct {
	status   int   // the response's status; 0 for an error
	err      error // what a classifier is given, nil for a response
	kind     httpretry.Class
	fromBody bool // the request body failed while Base read it: ErrRequestBody
	progress int  // how far the attempt got, as the httptrace hooks told it
}

// attemptError returns the model's view of how attempt b ended, for a
// caller whose context had not ended and an attempt that did not lose.
func (r *run) attemptError(e *effPolicy, b *baseRec) modelErr {
	me := modelErr{kind: classUnknown, progress: b.out.stage}
	plan := r.calls[b.call].spec.bodyPlan(e)
	switch {
	case b.timedOut():
		me.err, me.kind = httpretry.ErrAttemptTimeout, httpretry.ClassTransient
	case b.signerFailed:
		me.err, me.progress = errors.New("signer"), stageNone
	case b.err != nil && errors.Is(b.err, errRedirectRefused):
		// The http.Client in Base refused a redirect: its own error, in a
		// *url.Error, which the rules take to be fatal whatever the hooks
		// told.
		me.err, me.progress, me.kind = errors.New("redirect refused"), stageAnswered, httpretry.ClassFatal
	case b.err != nil && b.out.redirect == redirectUnreachable && b.served:
		// The server processed the request and answered 303; the
		// http.Client's follow-up could not dial. Its *url.Error holds a
		// dial error, which does not make the attempt unprocessed: the
		// rules take it to be transient.
		me.err, me.progress, me.kind = b.err, stageAnswered, httpretry.ClassTransient
	case b.err != nil && b.bodyErr != nil:
		// Base failed while it read the body, after the header was written.
		me.err, me.progress = errFromBody, stageWritten
		if plan.sentBody() {
			me.kind, me.fromBody = httpretry.ClassFatal, true
		}
	case b.err != nil && b.out.broken == brokenBoth:
		me.err = errors.New("broken")
	case b.err != nil:
		me.err, me.kind = b.err, errKinds[b.out.err].class
		switch errKinds[b.out.err].name {
		case "nil-pointer", "panicky":
			me.err = errors.New("malformed") // what the Transport passes on
		}
	case b.resp == nil:
		me.err = errors.New("neither")
	default:
		me.status = b.status
	}
	return me
}

// realError reports whether attempt b ended in an error of a real
// net/http client that the model does not read: anything but an attempt
// timeout, a signer's failure and a redirect the client refused.
func (r *run) realError(b *baseRec) bool {
	return r.s.base != baseScripted && b.err != nil && !b.timedOut() && !b.signerFailed && !errors.Is(b.err, errRedirectRefused)
}

// progressClass is the class of an error of a type the rules do not know,
// at stage: judged by how far the attempt got, as far as Base told it
// through the httptrace hooks.
func (r *run) progressClass(b *baseRec, stage int) httpretry.Class {
	if !r.s.reach && r.s.base == baseScripted {
		return httpretry.ClassFatal // nothing told: it never reached a connection
	}
	switch stage {
	case stageConn:
		return httpretry.ClassNotProcessed
	case stageWritten, stageAnswered: // an answer that broke off after it began is the connection's too
		return httpretry.ClassTransient
	}
	return httpretry.ClassFatal
}

// breakerCounts reports how the breaker counts attempt b: as a failure,
// as a success, or not at all (excluded). Only what says something about
// the host counts: a failure worth retrying, a fatal error of a known type
// without a response; the caller's own cancellation, a lost hedge, a
// breaker's refusal below, the body's own failure and a fatal error of a
// type the rules do not know are excluded.
func (r *run) breakerCounts(e *effPolicy, b *baseRec) (failed, excluded bool) {
	cl, ok := r.modelClass(e, b)
	if !ok || b.panicked || (b.err != nil && b.out.err >= 0 && errKinds[b.out.err].name == "breaker-below" && !b.timedOut()) {
		return false, true
	}
	if retryable(cl) {
		return true, false
	}
	me := r.attemptError(e, b)
	if cl == httpretry.ClassFatal && me.err != nil {
		if me.fromBody || me.kind == classUnknown {
			return false, true
		}
		return true, false
	}
	return false, false
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
		v := r.headerText(ra[0])
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
			vs = append(vs, r.headerText(h))
		}
		if d, ok := modelRateLimit(strings.Join(vs, ",")); ok {
			return d, true, true
		}
	}
	if r.s.pol.reset != 0 && len(rs) == 1 {
		if rs[0].kind == hdrFuzz {
			return 0, false, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(r.headerText(rs[0])), 10, 64)
		if err == nil && n >= 0 {
			if n >= 100_000_000 { // a Unix time, as HintPolicy.ResetHeader says
				n = max(n-now.Unix(), 0)
			}
			if n <= 1<<32 {
				return time.Duration(n) * time.Second, true, true
			}
		}
	}
	return 0, false, true
}

// headerText is the value of h as the Transport reads it: a real server's
// header goes through net/http's parser, which trims the spaces around it.
func (r *run) headerText(h hdr) string {
	if r.s.base != baseScripted {
		return strings.TrimSpace(h.text(r.start))
	}
	return h.text(r.start)
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
