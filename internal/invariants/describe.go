package invariants

import (
	"fmt"
	"strconv"
	"strings"
)

// What a scenario drew, in words: the line a violation's report and a
// replay (HTTPRETRY_SEED) print.

// has reports whether an outcome of the scenario has a body of kind rb.
func (s *scenario) has(rb int) bool {
	for _, c := range s.calls {
		for _, o := range c.script {
			if o.err < 0 && o.broken == brokenNone && o.body == rb {
				return true
			}
		}
	}
	return false
}

// describe says what was drawn, leaving out what is default.
func (s *scenario) describe() string {
	var b strings.Builder
	p := &s.pol
	var parts []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	add(p.maxAttempts != 0, "attempts=%d", p.maxAttempts)
	add(true, "backoff=%s", backoffs[p.backoff].name)
	add(p.attemptTimeout != 0, "timeout=%v", p.attemptTimeout)
	add(p.maxRetryAfter != 0, "max-retry-after=%v", p.maxRetryAfter)
	add(p.maxReplay != 0, "max-replay=%d", p.maxReplay)
	add(p.keys != keysDefault, "keys=%s", keysNames[p.keys])
	add(p.attemptHeader != "", "attempt-header=%s", p.attemptHeader)
	add(p.budget != budgetDefault, "budget=%s", budgetNames[p.budget])
	add(p.breaker != 0, "breaker=%d", p.breaker)
	add(p.hedgeDelay != 0, "hedge=%v×%d", p.hedgeDelay, p.maxHedges)
	add(p.adaptive != 0, "adaptive=%d", p.adaptive)
	add(p.overload != overloadNone, "overload=%s", overloadNames[p.overload])
	add(p.should, "should-retry-header")
	add(p.reset != 0, "reset-header=%d", p.reset)
	add(p.ignoreRL, "ignore-ratelimit")
	add(p.classifier != classifyNone, "classify=%s", classifierNames[p.classifier])
	add(p.prepare != prepareNone, "prepare=%s@%d", prepareNames[p.prepare], p.prepareN)
	add(p.placement != 0, "in=%s", placementNames[p.placement])
	add(s.reach, "base-calls-httptrace")
	add(s.logger, "logger")
	add(s.panic.kind != panicNone, "panic=%s@call0#%d", panicNames[s.panic.kind], s.panic.n)
	add(s.base != baseScripted, "base=%s", baseNames[s.base])
	add(s.base != baseScripted && s.keepAlive, "keep-alive")
	add(s.layers != layersNone, "layers=%s", layersNames[s.layers])
	add(s.layers >= layersSigner && s.signReads, "signer-reads-GetBody")
	add(s.paced != "", "pacing-probe(t=%s, reannounce=%v)", s.paced, s.reannounce)
	add(s.nHosts > 1, "hosts=%d", s.nHosts)
	add(s.hostLimit > 0, "host-limit=%d", s.hostLimit)
	fmt.Fprintf(&b, "policy{%s}", strings.Join(parts, " "))
	for _, c := range s.calls {
		parts = parts[:0]
		add(c.nested, "made-by-PrepareRetry")
		add(c.inAttempt, "under-the-retry's-context")
		add(c.host != 0, "host=%s", hostName(c.host))
		add(c.form != formPlain, "url-host=%s", formNames[c.form])
		add(c.pathForm != 0, "url-path=%s", []string{"", "double-slash", "dot"}[c.pathForm])
		add(true, "%s", cmpOr(c.method, `""`))
		add(c.body != bodyNone, "body=%s/%d", bodyNames[c.body], c.bodyLen)
		add(c.failAt >= 0, "breaks@%d", c.failAt)
		add(c.clDelta != 0, "content-length%+d", c.clDelta)
		add(c.clUnknown, "content-length=unknown")
		add(c.callerKey != keyNone, "caller-key=%s", callerKeyHeaders[c.callerKey])
		add(c.keyLower, "lower-case-key-name")
		add(c.nilHeader, "nil-header")
		add(c.deadline != 0, "deadline=%v", c.deadline)
		switch c.cancel {
		case cancelAtTime:
			add(true, "cancel@%v", c.cancelAt)
		case cancelAtAttempt, cancelAtRetry:
			add(true, "cancel=%s#%d", cancelNames[c.cancel], c.cancelN)
		default:
			add(c.cancel != cancelNone, "cancel=%s", cancelNames[c.cancel])
		}
		add(c.cancel != cancelNone && c.cause != causeNone, "cause=%d", c.cause)
		add(c.override != overrideNone, "override=%s", overrideNames[c.override])
		add(c.start != 0, "start=%v", c.start)
		var script []string
		for _, o := range c.script {
			script = append(script, o.String())
		}
		add(true, "script=[%s]", strings.Join(script, ", "))
		fmt.Fprintf(&b, " call%d{%s}", c.idx, strings.Join(parts, " "))
	}
	return b.String()
}

func (o *outcome) String() string {
	var parts []string
	switch {
	case o.broken == brokenBoth:
		parts = append(parts, fmt.Sprintf("%d+error", o.status))
	case o.broken == brokenNeither:
		parts = append(parts, "neither")
	case o.err >= 0:
		parts = append(parts, errKinds[o.err].name)
	default:
		parts = append(parts, strconv.Itoa(o.status))
		if o.body != rbText {
			parts = append(parts, rbNames[o.body])
		}
		for _, h := range o.headers {
			v := h.value
			switch h.kind {
			case hdrDate:
				v = fmt.Sprintf("date%+ds", h.off)
			case hdrEpoch:
				v = fmt.Sprintf("epoch%+ds", h.off)
			}
			parts = append(parts, fmt.Sprintf("%s:%q", h.name, v))
		}
	}
	if o.stage != stageAnswered {
		parts = append(parts, "at "+stageNames[o.stage])
	}
	if o.delay > 0 {
		parts = append(parts, "after "+o.delay.String())
	}
	if o.late {
		parts = append(parts, "late")
	}
	if o.redirect != 0 {
		parts = append(parts, []string{"", "redirected", "redirect-refused", "redirected-unreachable"}[o.redirect])
	}
	if o.early {
		parts = append(parts, "early")
	}
	return strings.Join(parts, " ")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
