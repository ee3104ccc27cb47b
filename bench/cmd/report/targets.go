package main

import (
	"fmt"
	"math"
	"time"

	"github.com/seedhq/httpretry/bench/sim"
)

// targets evaluates the brief's quantitative goals on the results.
func (r *report) targets() []target {
	var ts []target
	if len(r.bench) > 0 {
		ts = append(ts, r.overheadTargets()...)
	}
	if len(r.metrics) > 0 {
		ts = append(ts, r.metricsTargets()...)
	}
	if len(r.hostState) > 0 {
		ts = append(ts, r.hostStateTargets()...)
	}
	for _, m := range sim.OCCModes() {
		var wc, wt float64
		for _, o := range r.occ {
			if rc, rt, _, _, ok := sim.OCCReference(m.Name, o.clients); ok && o.mode == m.Name {
				wc = math.Max(wc, math.Abs(o.calls/rc-1))
				wt = math.Max(wt, math.Abs(o.makespan/rt-1))
			}
		}
		c, t, _ := r.occWorst(m.Name)
		ts = append(ts,
			target{"A " + m.Name + ": calls", "±3 % of the reference at every client count", "worst " + c, wc <= 0.03},
			target{"A " + m.Name + ": makespan", "±6 % of the reference at every client count", "worst " + t, wt <= 0.06})
	}
	for _, o := range r.occOrderings() {
		ts = append(ts, target{"A ordering", o.name, o.measured, o.met})
	}
	for _, h := range r.herds {
		if h.config.N != 1000 {
			continue
		}
		for _, p := range h.points {
			switch p.Mode {
			case "full":
				ideal := p.IdealAfter.Mean
				ts = append(ts,
					target{"B full, " + h.label, "peak after recovery ≤ 1.2 × uniform-spread ideal",
						fmt.Sprintf("mean-curve peak %.1f = %.2f × ideal %.1f; per-run peak %.1f = %.2f ×", p.MeanPeakAfter, p.MeanPeakAfter/ideal, ideal, p.PeakAfter.Mean, p.PeakAfter.Mean/ideal),
						p.MeanPeakAfter <= 1.2*ideal},
					target{"B full, " + h.label, "≈ 0 rejections after recovery",
						fmt.Sprintf("%.1f of %d (max %.0f)", p.RejectedAfter.Mean, h.config.N, p.RejectedAfter.Max), p.RejectedAfter.Max <= 0.001*float64(h.config.N)})
			case "none":
				ts = append(ts, target{"B none, " + h.label, "the herd: one window holds all N",
					fmt.Sprintf("peak %.0f of %d in every run", p.PeakAfter.Min, h.config.N), p.PeakAfter.Min == float64(h.config.N)})
			}
		}
	}
	def := r.storm("default (token bucket)", 1, 300*time.Second)
	ts = append(ts, target{"C default budget, 100 % failure, 300 s", "≤ 1.05 attempts per request",
		fmt.Sprintf("%.4f", def.AttemptsPerRequest()), def.AttemptsPerRequest() <= 1.05})
	for _, d := range stormDurations {
		worst, at := 0.0, 0.0
		for _, f := range []float64{0, 0.01, 0.05} {
			diff := math.Abs(r.storm("default (token bucket)", f, d).Availability() - r.storm("none", f, d).Availability())
			if diff >= worst {
				worst, at = diff, f
			}
		}
		ts = append(ts, target{fmt.Sprintf("C default budget, f ≤ 5 %%, %v", d), "availability within 0.1 pp of no budget",
			fmt.Sprintf("worst %.3f pp (f = %g %%)", 100*worst, 100*at), worst <= 0.001})
	}
	for _, m := range r.meta {
		if m.budget != "default (token bucket)" {
			continue
		}
		limit := m.config.RecoveryLimit(m.run.Backlog)
		took := m.run.Recovered - m.config.BlipEnd
		measured := "never recovered"
		if m.run.Recovered > 0 {
			measured = fmt.Sprintf("%.0f s after the blip, limit %.0f s (%.2f×)", took.Seconds(), limit.Seconds(), took.Seconds()/limit.Seconds())
		}
		ts = append(ts, target{fmt.Sprintf("C2 default budget, seed %d", m.seed), "recovery ≤ 1.5 × backlog/(μ−λ)",
			measured, m.run.Recovered > 0 && took <= limit*3/2})
	}
	ts = append(ts, r.hedgingTargets()...)
	if r.overload != nil {
		ts = append(ts, r.overloadTargets()...)
	}
	return ts
}

// occOrderings checks the qualitative claims of Brooker's 2015 post.
func (r *report) occOrderings() []target {
	calls := func(m string, c int) float64 { return r.occPoint(m, c).calls }
	span := func(m string, c int) float64 { return r.occPoint(m, c).makespan }
	var ts []target
	ok, worst := true, ""
	for _, c := range sim.OCCClientCounts() {
		if c < 40 {
			continue
		}
		if !(calls("exponential", c) > calls("decorrelated", c) && calls("decorrelated", c) > math.Max(calls("equal", c), calls("full", c))) {
			ok, worst = false, fmt.Sprintf("fails at %d clients", c)
		}
	}
	if ok {
		worst = fmt.Sprintf("at 100 clients %.0f > %.0f > %.0f ≈ %.0f", calls("exponential", 100), calls("decorrelated", 100), calls("equal", 100), calls("full", 100))
	}
	ts = append(ts, target{"calls: exponential ≫ decorrelated > equal ≈ full from 40 clients", "", worst, ok})
	cut := 1 - calls("full", 100)/calls("exponential", 100)
	ts = append(ts, target{"full cuts calls by more than half at 100 clients", "", fmt.Sprintf("−%.0f %% (reference −57 %%)", 100*cut), cut > 0.5})
	ok = true
	for _, c := range sim.OCCClientCounts() {
		ok = ok && span("exponential", c) > span("equal", c) && span("equal", c) > span("full", c)
	}
	ts = append(ts, target{"time: exponential ≫ equal > full at every client count", "",
		fmt.Sprintf("at 100 clients %.1f s > %.1f s > %.1f s", span("exponential", 100)/1000, span("equal", 100)/1000, span("full", 100)/1000), ok})
	ok = true
	for _, c := range sim.OCCClientCounts() {
		switch {
		case c <= 110:
			ok = ok && span("decorrelated", c) <= span("full", c)*1.02
		case c >= 150:
			ok = ok && span("decorrelated", c) > span("full", c)*0.98
		}
	}
	ts = append(ts, target{"time: decorrelated ≤ full up to 110 clients, above from 150 (±2 %)", "",
		fmt.Sprintf("at 100 clients %.2f s vs %.2f s; at 190 %.2f s vs %.2f s", span("decorrelated", 100)/1000, span("full", 100)/1000, span("decorrelated", 190)/1000, span("full", 190)/1000), ok})
	ok = true
	for _, m := range sim.OCCModes() {
		ok = ok && calls(m.Name, 190)/calls(m.Name, 100) > 1.9
	}
	ts = append(ts, target{"no mode removes the super-linear growth of work", "",
		fmt.Sprintf("calls(190)/calls(100): full %.2f, none %.2f (linear would be 1.9)", calls("full", 190)/calls("full", 100), calls("none", 190)/calls("none", 100)), ok})
	return ts
}

// overheadTargets checks the success-path goals on the benchmark medians.
func (r *report) overheadTargets() []target {
	s := r.bench
	med := func(c, client, unit string) float64 { return s.median(c, client, unit) }
	ns := sim.Median(s.roundRatios("get", "httpretry", "ns/op"))
	allocs := med("get", "httpretry", "allocs/op") - med("get", "bare", "allocs/op")
	extraB := med("post-1MiB-getbody", "httpretry", "B/op") - med("post-1MiB-getbody", "bare", "B/op")
	extraOpaque := med("post-1MiB-opaque", "httpretry", "B/op") - med("post-1MiB-opaque", "bare", "B/op")
	return []target{
		{"overhead: GET ns/op", "within 3 % of bare", fmt.Sprintf("%+.1f %% (median of the per-round ratios; range %s)", 100*(ns-1), ratioSpread(s.roundRatios("get", "httpretry", "ns/op"))), ns <= 1.03},
		{"overhead: GET allocs/op", "≤ 2 more than bare", fmt.Sprintf("%+.0f", allocs), allocs <= 2},
		{"overhead: 1 MiB POST with GetBody", "B/op within 1 % of the body size of bare's", fmt.Sprintf("%+.0f B = %.2f %% of 1 MiB", extraB, 100*extraB/(1<<20)), extraB <= 0.01*(1<<20)},
		{"overhead: 1 MiB POST without GetBody", "one buffer of the body's size: B/op within 5 % of 1 MiB over bare's", fmt.Sprintf("%+.0f B = %.3f × 1 MiB", extraOpaque, extraOpaque/(1<<20)), extraOpaque <= 1.05*(1<<20)},
	}
}
