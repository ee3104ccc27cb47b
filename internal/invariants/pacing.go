package invariants

import (
	"errors"
	"fmt"
	"time"

	"github.com/seedhq/httpretry"
)

// A pause that the host announced and that is longer than a caller would
// wait (MaxRetryAfter) refuses calls at once with ErrRateLimited, but lets
// one attempt through once a minute, as a probe: its answer replaces what
// was known, and an answer that announces nothing ends the pause. A reset
// further than 24 h is believed as far as 24 h. Some scenarios play that
// on one host, on the bubble's clock:
//
//	call0 at 0:           200, RateLimit r=0 and t a day or 2^32 s away
//	call1 at 30 s:        refused, nothing sent (no probe yet)
//	call2 at 90 s:        the probe: sent; its 200 announces the pause again, or nothing
//	call3 at 100 s:       refused if the probe announced it again, else sent
//	call4, call5 at 24 h + 110 s, at once: both sent, the pause over (clamped to
//	                      24 h): were it not clamped, one would be the probe and
//	                      the other refused

// paceProbeCalls are the starts of the calls of a pacing scenario.
var paceProbeCalls = []time.Duration{0, 30 * time.Second, 90 * time.Second, 100 * time.Second,
	24*time.Hour + 110*time.Second, 24*time.Hour + 110*time.Second}

// paceProbe draws, now and then, a pacing scenario in place of the calls
// drawn: it keeps the policy, paces, and calls one host.
func (g gen) paceProbe(s *scenario) {
	if !g.chance(0.02) {
		return
	}
	s.paced, s.reannounce = pick(g, "86400", "4294967296"), g.chance(0.5)
	p := &s.pol
	p.overload, p.placement, p.hedgeDelay, p.prepare, p.ignoreRL = overloadPace, 0, 0, prepareNone, false
	s.nHosts, s.hostLimit, s.base, s.panic, s.layers = 0, 0, baseScripted, panicSpec{}, layersNone
	announce := hdr{name: "RateLimit", value: `"q";r=0;t=` + s.paced}
	s.calls = nil
	for i, start := range paceProbeCalls {
		o := &outcome{status: 200, err: -1, stage: stageAnswered}
		switch {
		case i == 0, i == 2 && s.reannounce:
			o.headers = []hdr{announce}
		case i >= 4:
			o.delay = 5 * ms // answered after both were admitted
		}
		s.calls = append(s.calls, &callSpec{idx: i, method: "GET", failAt: -1, start: start, script: []*outcome{o}})
	}
}

// checkPaceProbe checks the calls of a pacing scenario.
func (r *run) checkPaceProbe() {
	// A fuzzer's first answer replaces the one that announces the pause.
	if r.s.paced == "" || r.s.fuzzed || r.effective(r.calls[0].spec).invalid {
		return
	}
	coverage.paceProbes.Add(1)
	refused := map[int]bool{1: true, 3: r.s.reannounce}
	for i, c := range r.calls {
		c.mu.Lock()
		attempts := len(c.attempts)
		c.mu.Unlock()
		what := fmt.Sprintf("pacing (t=%s s, the probe's answer announces it again: %v): call%d at %v", r.s.paced, r.s.reannounce, i, c.spec.start)
		switch {
		case refused[i] && (attempts != 0 || !errors.Is(c.err, httpretry.ErrRateLimited)):
			r.violate("%s: %d attempts and error %v, want none sent, refused with ErrRateLimited", what, attempts, safeError(c.err))
		case !refused[i] && (attempts != 1 || c.err != nil):
			r.violate("%s: %d attempts and error %v, want 1 sent", what, attempts, safeError(c.err))
		}
	}
}
