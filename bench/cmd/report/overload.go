package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/seedhq/httpretry/bench/sim"
)

// The overload scenarios (D, C2 on the Transport, E) run the real
// Transport inside testing/synctest bubbles, which only a test can open:
// runOverloadTable runs TestOverloadTable at full length and has it write
// its figures as JSON, which the report reads.

// runOverloadTable runs TestOverloadTable in dir (the bench module) and
// writes its table to file.
func runOverloadTable(dir, file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestOverloadTable$", "./sim")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "HTTPRETRY_SIM=full", "HTTPRETRY_SIM_OUT="+abs)
	return cmd.Run()
}

func readOverloadTable(file string) (*sim.OverloadTable, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var t sim.OverloadTable
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &t, nil
}

// spread is a figure over the seeds of a table: its mean and range.
type spread struct{ mean, min, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := spread{min: slices.Min(xs), max: slices.Max(xs)}
	for _, x := range xs {
		s.mean += x
	}
	s.mean /= float64(len(xs))
	return s
}

func (s spread) String() string {
	if fmt.Sprintf("%.2f", s.min) == fmt.Sprintf("%.2f", s.max) {
		return fmt.Sprintf("%.2f", s.mean)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", s.mean, s.min, s.max)
}

// overloadD returns scenario D's figure f for arm against the host that sheds or
// not, over the seeds.
func overloadD(t *sim.OverloadTable, arm string, sheds bool, f func(sim.OverloadRow) float64) spread {
	var xs []float64
	for _, r := range t.D {
		if r.Arm == arm && r.Sheds == sheds {
			xs = append(xs, f(r))
		}
	}
	return spreadOf(xs)
}

// overloadC2 returns the C2 rows of arm.
func overloadC2(t *sim.OverloadTable, arm string) []sim.MetastableRow {
	var rs []sim.MetastableRow
	for _, r := range t.C2 {
		if r.Arm == arm {
			rs = append(rs, r)
		}
	}
	return rs
}

func overloadE(t *sim.OverloadTable, h sim.QuotaHeaders, arm string) (sim.QuotaRow, bool) {
	for _, r := range t.E {
		if r.Headers == h && r.Arm == arm {
			return r, true
		}
	}
	return sim.QuotaRow{}, false
}

var (
	armBudget   = sim.RetryBudget().Name
	armThrottle = sim.Throttle(0).Name
	armAggr     = sim.Throttle(1.1).Name
	armLimit    = sim.Limit(false).Name
	armPace     = sim.Pace().Name
)

// seconds formats a duration after the blip; −1 is never.
func seconds(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

// recoveries lists each seed's recovery after the blip, as a fraction of
// its limit, and reports whether every seed met the goals.
func recoveries(rs []sim.MetastableRow) (after, ratio, first string, met bool) {
	var a, q, f []string
	met = len(rs) > 0
	for _, r := range rs {
		a = append(a, seconds(r.Recovered))
		f = append(f, seconds(r.FirstGoodput))
		if r.Recovered < 0 {
			q = append(q, "–")
			met = false
			continue
		}
		q = append(q, fmt.Sprintf("%.2f", r.Recovered.Seconds()/r.Limit.Seconds()))
		met = met && r.Recovered <= r.Limit/4 && r.FirstGoodput >= 0 && r.FirstGoodput <= 10*time.Second
	}
	return strings.Join(a, ", "), strings.Join(q, ", "), strings.Join(f, ", "), met
}

// overloadTargets checks issue 16's goals on the table.
func (r *report) overloadTargets() []target {
	t := r.overload
	load := func(arm string, sheds bool) spread {
		return overloadD(t, arm, sheds, func(x sim.OverloadRow) float64 { return x.Load })
	}
	good := func(arm string, sheds bool) spread {
		return overloadD(t, arm, sheds, func(x sim.OverloadRow) float64 { return x.Goodput })
	}
	ts := []target{
		{"D, host sheds: throttling, K = 2 (default)", "load ≤ 1.1 μ", load(armThrottle, true).String() + " μ: K attempts per accept, by design; K = 1.1 meets it", load(armThrottle, true).mean <= 1.1},
		{"D, host sheds: throttling, K = 1.1", "load ≤ 1.1 μ", load(armAggr, true).String() + " μ (K × goodput; at the edge)", math.Round(100*load(armAggr, true).mean) <= 110},
		{"D, host sheds: throttling, K = 2", "goodput ≥ 0.9 μ", good(armThrottle, true).String() + " μ", good(armThrottle, true).min >= 0.9},
		{"D, host queues: throttling, K = 2", "load ≤ 1.1 μ, goodput ≥ 0.9 μ", fmt.Sprintf("load %s μ, goodput %s μ: only timeouts to go by; the limit meets it", load(armThrottle, false), good(armThrottle, false)),
			load(armThrottle, false).max <= 1.1 && good(armThrottle, false).min >= 0.9},
	}
	for _, sheds := range []bool{false, true} {
		host := "queues"
		if sheds {
			host = "sheds"
		}
		ts = append(ts, target{"D, host " + host + ": concurrency limit", "load ≤ 1.1 μ, goodput ≥ 0.9 μ",
			fmt.Sprintf("load %s μ, goodput %s μ", load(armLimit, sheds), good(armLimit, sheds)),
			load(armLimit, sheds).max <= 1.1 && good(armLimit, sheds).min >= 0.9})
	}
	for _, arm := range []string{armThrottle, armLimit} {
		after, ratio, first, met := recoveries(overloadC2(t, arm))
		ts = append(ts, target{"C2 " + arm, "recovery ≤ 0.25 × backlog/(μ−λ); goodput > 0 within 10 s of the blip",
			fmt.Sprintf("recovered %s after the blip (%s ×); first goodput %s after", after, ratio, first), met})
	}
	for _, h := range []sim.QuotaHeaders{sim.LegacyHeaders, sim.RateLimitField} {
		base, ok1 := overloadE(t, h, armBudget)
		paced, ok2 := overloadE(t, h, armPace)
		if !ok1 || !ok2 || base.TooMany == 0 {
			continue
		}
		cut := 1 - float64(paced.TooMany)/float64(base.TooMany)
		ts = append(ts, target{"E pacing, " + h.String(), "≥ 95 % fewer 429s, same work done",
			fmt.Sprintf("%d → %d 429s (−%.0f %%); %d and %d of %d done", base.TooMany, paced.TooMany, 100*cut, base.Done, paced.Done, sim.DefaultQuota(h).Batch.Total),
			cut >= 0.95 && paced.Done >= base.Done})
	}
	return ts
}

func (r *report) overloadSection(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	t := r.overload
	w("## 7. Overload: throttling, a concurrency limit, pacing\n\n")
	w("The overload controls of `Policy.Overload` (see [overload.md](overload.md)) on the real Transport in\n")
	w("front of a simulated host, on the `testing/synctest` clock (`bench/sim`, `TestOverloadTable`, %d seeds\n", len(sim.TableSeeds))
	w("each; mean and range). Arms: the Transport without retries, with retries and no budget, with its\n")
	w("default retry budget (\"retry budget\"), and the budget plus one control each; and failsafe-go v0.9.8's\n")
	w("`adaptivethrottler` and `adaptivelimiter`, with their defaults, under the Transport and its budget.\n\n")

	w("**Scenario D: overload.** A FIFO host of capacity μ = 300/s, offered 600/s (Poisson) for 60 s, 1 s\n")
	w("attempt timeout, 4 attempts, callers waiting 5 s; measured from t = 10 s. The host serves every\n")
	w("request that reaches it, abandoned or not; the one that sheds answers 503 at once to a request that\n")
	w("would wait more than 0.5 s. Load and goodput in units of μ.\n\n")
	w("![overload](img/overload-d.svg)\n\n")
	w("| arm | host queues: load | goodput | refused/s | host sheds: load | goodput | refused/s |\n|---|---|---|---|---|---|---|\n")
	for _, a := range sim.OverloadArms() {
		cell := func(sheds bool, f func(sim.OverloadRow) float64) string {
			return overloadD(t, a.Name, sheds, f).String()
		}
		ld := func(x sim.OverloadRow) float64 { return x.Load }
		gp := func(x sim.OverloadRow) float64 { return x.Goodput }
		rf := func(x sim.OverloadRow) float64 { return x.Refused }
		w("| %s | %s | %s | %.0f | %s | %s | %.0f |\n", a.Name, cell(false, ld), cell(false, gp), overloadD(t, a.Name, false, rf).mean,
			cell(true, ld), cell(true, gp), overloadD(t, a.Name, true, rf).mean)
	}
	w("\nThrottling settles where the SRE formula puts it, at K attempts per accept: against a host that sheds,\n")
	w("K = 2 (the default) keeps load at 2 μ, K = 1.1 at 1.1 μ. Against a host that queues, its only signal is\n")
	w("the timeout, which comes when the queue is already a timeout long, so goodput swings between collapse\n")
	w("and capacity. The concurrency limit holds both hosts at capacity.\n\n")

	w("**Scenario C2 on the Transport.** Bronson's retry loop (λ 280/s, μ 300/s, 1 s timeout, one retry, a\n")
	w("10 s blip at t = 10 s; section 5), 240 s. Recovery: the first 5 s with goodput above 250/s; the limit\n")
	w("is the backlog each arm's blip left at the host over μ − λ.\n\n")
	w("![overload-c2](img/overload-c2.svg)\n\n")
	w("| arm | attempts/s, t = 40–120 s | backlog | recovered after the blip | ÷ limit | first goodput after |\n|---|---|---|---|---|---|\n")
	for _, a := range sim.OverloadArms() {
		rs := overloadC2(t, a.Name)
		var att, backlog []float64
		for _, x := range rs {
			att, backlog = append(att, x.Attempts), append(backlog, x.Backlog)
		}
		after, ratio, first, _ := recoveries(rs)
		w("| %s | %.0f | %.0f | %s | %s | %s |\n", a.Name, spreadOf(att).mean, spreadOf(backlog).mean, after, ratio, first)
	}
	w("\nShedding first attempts at the client is what a retry budget cannot do: the budget stops the\n")
	w("retries, then the backlog drains at μ − λ = 20/s. The limit keeps the backlog small to begin with;\n")
	w("throttling with K = 2 sheds until the host answers again. K = 1.1 sheds too much: with timeouts as its\n")
	w("only signal it lets through fewer attempts than the host could serve and recovers later.\n\n")

	w("**Scenario E: a quota API.** Ten workers work through 1000 requests against an API allowing 100 per\n")
	w("10 s window (answers in 20 ms), which announces what is left and when it resets, or only sends a\n")
	w("429's Retry-After. Pacing reads `X-RateLimit-Remaining` with `Hints.ResetHeader`, or the RateLimit field.\n\n")
	w("![overload-e](img/overload-e.svg)\n\n")
	w("| announced by | arm | done | 429s | makespan |\n|---|---|---|---|---|\n")
	for _, x := range t.E {
		w("| %v | %s | %d | %d | %.0f s |\n", x.Headers, x.Arm, x.Done, x.TooMany, x.Makespan.Seconds())
	}
	w("\nWith the remaining count, pacing sends only while requests are left: no 429 at all. With Retry-After\n")
	w("alone it learns of the spent quota from the first 429 of each window, while the other workers'\n")
	w("requests are already on their way.\n\n")
}

// overloadCharts draws scenario D's load and goodput by arm, C2's goodput
// over time and E's 429s.
func overloadCharts(dir string, t *sim.OverloadTable) error {
	arms := sim.OverloadArms()
	var plots [][]*plot.Plot
	for _, sheds := range []bool{false, true} {
		p := plot.New()
		p.Title.Text = "host queues"
		if sheds {
			p.Title.Text = "host sheds (503 past 0.5 s of queue)"
		}
		if !sheds {
			p.Title.Text = "Scenario D: μ = 300/s offered 2 μ for 60 s, mean of 3 seeds — " + p.Title.Text
		}
		p.Y.Label.Text = "× μ"
		p.Legend.Top = true
		var names []string
		for i, what := range []struct {
			name string
			f    func(sim.OverloadRow) float64
		}{{"load at the host", func(x sim.OverloadRow) float64 { return x.Load }}, {"goodput", func(x sim.OverloadRow) float64 { return x.Goodput }}} {
			var vs plotter.Values
			for _, a := range arms {
				vs = append(vs, min(overloadD(t, a.Name, sheds, what.f).mean, 3))
			}
			if err := bars(p, i, what.name, vs, 10); err != nil {
				return err
			}
		}
		for _, a := range arms {
			names = append(names, strings.TrimPrefix(strings.ReplaceAll(a.Name, "budget + failsafe-go ", "failsafe "), "+ "))
		}
		p.NominalX(names...)
		p.X.Tick.Label.Rotation, p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = 0.5, -1, -0.5
		ref, _ := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1.1}, {X: float64(len(arms)) - 0.5, Y: 1.1}})
		ref.Dashes, ref.Color = []vg.Length{vg.Points(4), vg.Points(3)}, plotutil.Color(2)
		p.Add(ref)
		p.Legend.Add("1.1 μ (goal for load; bars cut at 3)", ref)
		p.Y.Min, p.Y.Max = 0, 3.6
		plots = append(plots, []*plot.Plot{p})
	}
	if err := panels(dir, "overload-d", plots, 24*vg.Centimeter, 9*vg.Centimeter); err != nil {
		return err
	}

	p := plot.New()
	p.Title.Text = "Scenario C2 on the Transport: goodput per second, seed 1, 10 s blip at t = 10 s"
	p.X.Label.Text, p.Y.Label.Text = "time (s)", "goodput per second"
	p.Legend.Top = true
	const until = 180
	for i, name := range []string{armBudget, armThrottle, armAggr, armLimit, sim.FailsafeThrottler().Name} {
		rs := overloadC2(t, name)
		if len(rs) == 0 {
			continue
		}
		var xys plotter.XYs
		for s, g := range rs[0].Goodput {
			if s > until {
				break
			}
			xys = append(xys, plotter.XY{X: float64(s), Y: float64(g)})
		}
		line(p, i, name, xys, false)
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, until, 0, 450
	if err := save(p, dir, "overload-c2", 24*vg.Centimeter, 11*vg.Centimeter); err != nil {
		return err
	}

	p = plot.New()
	p.Title.Text = "Scenario E: 429s received working through 1000 requests, quota 100 per 10 s"
	p.Y.Label.Text = "429s"
	p.Legend.Top = true
	heads := []sim.QuotaHeaders{sim.LegacyHeaders, sim.RateLimitField, sim.RetryAfterOnly}
	for i, arm := range []string{armBudget, armPace} {
		var vs plotter.Values
		for _, h := range heads {
			x, _ := overloadE(t, h, arm)
			vs = append(vs, float64(x.TooMany))
		}
		if err := bars(p, i, arm, vs, 16); err != nil {
			return err
		}
	}
	var names []string
	for _, h := range heads {
		names = append(names, h.String())
	}
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, 130 // room for the legend
	return save(p, dir, "overload-e", 20*vg.Centimeter, 9*vg.Centimeter)
}

// bars adds the i-th of two series of bars, width points wide, side by
// side at each nominal x.
func bars(p *plot.Plot, i int, name string, vs plotter.Values, width float64) error {
	b, err := plotter.NewBarChart(vs, vg.Points(width))
	if err != nil {
		return err
	}
	b.Color, b.LineStyle.Width = plotutil.Color(i), 0
	b.Offset = vg.Points(width*float64(i) - width/2)
	p.Add(b)
	p.Legend.Add(name, b)
	return nil
}
