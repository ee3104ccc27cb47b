package hedgeload

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CDFLevels are the quantiles each Stats keeps in Quantiles, to draw its
// latency distribution: every percent, then the tail in finer steps.
var CDFLevels = func() []float64 {
	var qs []float64
	for i := 1; i < 100; i++ {
		qs = append(qs, float64(i)/100)
	}
	return append(qs, 0.995, 0.998, 0.999, 0.9995, 0.9998, 0.9999)
}()

// Results are the runs of cmd/hedgeload: by scenario, then by variant,
// one per round.
type Results map[string]map[string][]Result

// ReadResults reads the JSON lines cmd/hedgeload writes, one Result each.
func ReadResults(path string) (Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs := Results{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if rs[r.Scenario] == nil {
			rs[r.Scenario] = map[string][]Result{}
		}
		rs[r.Scenario][r.Variant] = append(rs[r.Scenario][r.Variant], r)
	}
	return rs, sc.Err()
}

// Params returns what cmd/hedgeload ran with, read back from its results:
// the rounds (runs of each variant on each scenario), the scale, and the
// scenarios present, in the order of Scenarios. ok is false when there are
// no results or when they disagree (a file that mixes runs of different
// rounds or scales), so that a report names only parameters that produced
// every figure it shows.
func (rs Results) Params() (rounds int, scale float64, scenarios []string, ok bool) {
	first := true
	for _, sc := range Scenarios(1) {
		byVariant, found := rs[sc.Name]
		if !found {
			continue
		}
		scenarios = append(scenarios, sc.Name)
		for _, runs := range byVariant {
			for _, r := range runs {
				if first {
					rounds, scale, first = len(runs), r.Scale, false
				}
				if len(runs) != rounds || r.Scale != scale {
					return 0, 0, nil, false
				}
			}
		}
	}
	if first || scale <= 0 || len(scenarios) != len(rs) {
		return 0, 0, nil, false
	}
	return rounds, scale, scenarios, true
}

// Phase returns the stats of the phase called name, or zero ones.
func (r Result) Phase(name string) Stats {
	for _, p := range r.Phases {
		if p.Phase == name {
			return p
		}
	}
	return Stats{}
}

// PhaseBounds returns when T2's brownout starts and ends, into the run.
func (r Result) PhaseBounds() (start, end time.Duration) {
	for _, sc := range Scenarios(r.Scale) {
		if sc.Name == "T2" {
			return sc.Phases[0].Len, sc.Phases[0].Len + sc.Phases[1].Len
		}
	}
	return 0, 0
}

// delayRatio is the traced delay at over the one at ref, NaN without a
// trace.
func (r Result) delayRatio(at, ref time.Duration) float64 {
	d, ok := r.DelayAt(at)
	d0, ok0 := r.DelayAt(ref)
	if !ok || !ok0 || d0 == 0 {
		return math.NaN()
	}
	return float64(d) / float64(d0)
}

// T2DelayBack is the delay 2 s (× the run's scale) after the brownout over
// the delay before it; NaN for a client that does not report its delay.
func (r Result) T2DelayBack() float64 {
	start, end := r.PhaseBounds()
	return r.delayRatio(end+time.Duration(float64(2*time.Second)*r.Scale), start)
}

// T3Follow is the number of requests after T3's shift until the delay
// settles within ±25 % of twice the new 20 ms median; NaN for a client
// that does not report its delay or a delay that never settles.
func (r Result) T3Follow() float64 {
	at, ok := r.Settled(40*time.Millisecond, 0.25)
	if !ok {
		return math.NaN()
	}
	return float64(at - int64(r.Total.Requests/2))
}

// column is one column of a table: a figure of each run, NaN where it
// does not apply.
type column struct {
	head string
	f    func(Result) float64
	unit string
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func columns(sc string) []column {
	cols := []column{
		{"p50", func(r Result) float64 { return ms(r.Total.P50) }, "ms"},
		{"p99", func(r Result) float64 { return ms(r.Total.P99) }, "ms"},
		{"p99.9", func(r Result) float64 { return ms(r.Total.P999) }, "ms"},
		{"extra requests", func(r Result) float64 { return 100 * r.Total.Extra() }, "%"},
	}
	switch sc {
	case "T2":
		cols = []column{
			{"p99.9 before", func(r Result) float64 { return ms(r.Phase("before").P999) }, "ms"},
			{"extra before", func(r Result) float64 { return 100 * r.Phase("before").Extra() }, "%"},
			{"extra in the brownout", func(r Result) float64 { return 100 * r.Phase("brownout").Extra() }, "%"},
			{"p99.9 just after (2 s × scale)", func(r Result) float64 { return ms(r.Phase("just after").P999) }, "ms"},
			{"extra just after", func(r Result) float64 { return 100 * r.Phase("just after").Extra() }, "%"},
			{"p99.9 after ÷ before", func(r Result) float64 {
				return float64(r.Phase("after").P999) / float64(r.Phase("before").P999)
			}, "×"},
			{"delay at the brownout's end ÷ before", func(r Result) float64 {
				start, end := r.PhaseBounds()
				return r.delayRatio(end, start)
			}, "×"},
			{"delay 2 s × scale after ÷ before", Result.T2DelayBack, "×"},
		}
	case "T3":
		cols = append(cols, column{"requests until the delay follows", Result.T3Follow, ""})
	}
	return append(cols,
		column{"new connections", func(r Result) float64 { return float64(r.Dials) }, ""},
		column{"errors", func(r Result) float64 { return float64(r.Total.Errors) }, ""})
}

// Table writes one scenario's results as a markdown table, one row per
// variant, each cell the median [min–max] over the rounds.
func Table(w io.Writer, sc string, results map[string][]Result) {
	cols := columns(sc)
	fmt.Fprintf(w, "| variant |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, v := range Variants() {
		rs := results[v.Name]
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s |", v.Name)
		for _, c := range cols {
			s, ok := spread(rs, c.f)
			if !ok {
				fmt.Fprint(w, " – |")
				continue
			}
			fmt.Fprintf(w, " %s [%s–%s]%s |", num(s.Median), num(s.Min), num(s.Max), unit(c.unit))
		}
		fmt.Fprintln(w)
	}
}

// Spread is the median of a figure over the rounds and its range.
type Spread struct{ Median, Min, Max float64 }

// spread is the spread of f over rs, leaving out NaN. (Package rounds has
// the same, but imports sim, whose tests import this package.)
func spread(rs []Result, f func(Result) float64) (Spread, bool) {
	var xs []float64
	for _, r := range rs {
		if x := f(r); !math.IsNaN(x) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return Spread{}, false
	}
	slices.Sort(xs)
	n := len(xs)
	m := xs[n/2]
	if n%2 == 0 {
		m = (xs[n/2-1] + xs[n/2]) / 2
	}
	return Spread{m, xs[0], xs[n-1]}, true
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

func num(x float64) string {
	switch {
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// Goal is one of issue 14's goals for httpretry-adaptive, evaluated on the
// medians over the rounds.
type Goal struct {
	Name, Target, Measured string
	Met                    bool
}

// Goals evaluates issue 14's goals on rs, for the scenarios it holds.
func Goals(rs Results) []Goal {
	med := func(sc, v string, f func(Result) float64) float64 {
		s, ok := spread(rs[sc][v], f)
		if !ok {
			return math.NaN()
		}
		return s.Median
	}
	const a = "httpretry-adaptive"
	p999 := func(r Result) float64 { return ms(r.Total.P999) }
	extra := func(r Result) float64 { return 100 * r.Total.Extra() }
	var gs []Goal
	if rs["T1"] != nil {
		none, ap, ae := med("T1", "none", p999), med("T1", a, p999), med("T1", a, extra)
		fp, fe := med("T1", "failsafe-quantile", p999), med("T1", "failsafe-quantile", extra)
		gs = append(gs,
			Goal{"T1 stragglers: p99.9", "≤ 1/15 of unhedged", fmt.Sprintf("%.1f ms vs %.0f ms unhedged (1/%.0f)", ap, none, none/ap), ap <= none/15},
			Goal{"T1 stragglers: extra requests", "≤ 2 %", fmt.Sprintf("%.2f %%", ae), ae <= 2},
			Goal{"T1 vs failsafe-go's quantile policy: p99.9", "no worse", fmt.Sprintf("%.1f ms vs %.1f ms", ap, fp), ap <= fp},
			Goal{"T1 vs failsafe-go's quantile policy: extra requests", "no worse", fmt.Sprintf("%.2f %% vs %.2f %%", ae, fe), ae <= fe})
	}
	if rs["T2"] != nil {
		be := med("T2", a, func(r Result) float64 { return 100 * r.Phase("brownout").Extra() })
		back := med("T2", a, Result.T2DelayBack)
		after := med("T2", a, func(r Result) float64 {
			return float64(max(r.Phase("just after").P999, r.Phase("after").P999)) / float64(r.Phase("before").P999)
		})
		gs = append(gs,
			Goal{"T2 brownout: extra requests during it", "≤ 5 %", fmt.Sprintf("%.2f %% (a fixed delay: %.0f %%)", be,
				med("T2", "failsafe-fixed", func(r Result) float64 { return 100 * r.Phase("brownout").Extra() })), be <= 5},
			Goal{"T2 brownout: the delay 2 s after it", "back to normal (±25 % of before)", fmt.Sprintf("%.2f × before", back), math.Abs(back-1) <= 0.25},
			Goal{"T2 brownout: p99.9 of the 10 s after it", "≤ 2 × the p99.9 before", fmt.Sprintf("%.2f ×", after), after <= 2})
	}
	if rs["T3"] != nil {
		follow, e := med("T3", a, Result.T3Follow), med("T3", a, extra)
		gs = append(gs,
			Goal{"T3 shift: the delay follows", "within 1,000 requests", fmt.Sprintf("%.0f requests", follow), follow <= 1000},
			Goal{"T3 shift: extra requests over the run", "≤ 3 %", fmt.Sprintf("%.2f %%", e), e <= 3})
	}
	return gs
}

// MeanQuantiles averages the latency quantiles (at CDFLevels) of the runs
// of one variant, quantile by quantile: the distribution of a typical
// round.
func MeanQuantiles(rs []Result) []time.Duration {
	var sum []float64
	n := 0
	for _, r := range rs {
		if len(r.Total.Quantiles) != len(CDFLevels) {
			continue
		}
		if sum == nil {
			sum = make([]float64, len(CDFLevels))
		}
		for i, q := range r.Total.Quantiles {
			sum[i] += float64(q)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]time.Duration, len(sum))
	for i, s := range sum {
		out[i] = time.Duration(s / float64(n))
	}
	return out
}
