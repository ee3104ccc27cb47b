package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/seedhq/httpretry/bench/sim"
)

// line adds a named line to p.
func line(p *plot.Plot, i int, name string, xys plotter.XYs, points bool) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		panic(err)
	}
	l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.2)
	p.Add(l)
	if points {
		s, _ := plotter.NewScatter(xys)
		s.Color, s.Shape = plotutil.Color(i), plotutil.Shape(i)
		p.Add(s)
		p.Legend.Add(name, l, s)
		return
	}
	p.Legend.Add(name, l)
}

// chartFormat is the image format of the charts: "svg" for the docs,
// "png" to look at them where no SVG viewer is at hand.
var chartFormat = "svg"

// save draws p into dir/name, with a margin on the right so the last tick
// label and a right-aligned title are not cut at the edge.
func save(p *plot.Plot, dir, name string, w, h vg.Length) error {
	img, err := draw.NewFormattedCanvas(w, h, chartFormat)
	if err != nil {
		return err
	}
	p.Draw(draw.Crop(draw.New(img), 0, -4*vg.Millimeter, 0, 0))
	f, err := os.Create(filepath.Join(dir, name+"."+chartFormat))
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// occCharts draws calls and makespan against clients for every mode, with
// the reference as crosses.
func occCharts(dir string, rs []occResult) error {
	for _, chart := range []struct {
		file, title, y string
		get            func(occResult) float64
		ref            func(string, int) (float64, bool)
		log            bool
	}{
		{"brooker-calls", "Scenario A: total writes (calls)", "calls", func(r occResult) float64 { return r.calls },
			func(m string, c int) (float64, bool) { v, _, _, _, ok := sim.OCCReference(m, c); return v, ok }, false},
		{"brooker-time", "Scenario A: completion time", "makespan (ms, log scale)", func(r occResult) float64 { return r.makespan },
			func(m string, c int) (float64, bool) { _, v, _, _, ok := sim.OCCReference(m, c); return v, ok }, true},
	} {
		p := plot.New()
		p.Title.Text = chart.title + " — lines: httpretry's strategies; crosses: Brooker's simulator"
		p.X.Label.Text, p.Y.Label.Text = "clients", chart.y
		var ticks []plot.Tick
		for _, c := range sim.OCCClientCounts() {
			t := plot.Tick{Value: float64(c)}
			if c%30 == 10 {
				t.Label = fmt.Sprint(c)
			}
			ticks = append(ticks, t)
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Legend.Top, p.Legend.Left = true, true
		if chart.log {
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		}
		var refs plotter.XYs
		for i, m := range sim.OCCModes() {
			var xys plotter.XYs
			for _, r := range rs {
				if r.mode != m.Name {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(r.clients), Y: chart.get(r)})
				if v, ok := chart.ref(m.Name, r.clients); ok {
					refs = append(refs, plotter.XY{X: float64(r.clients), Y: v})
				}
			}
			line(p, i, m.Name, xys, false)
		}
		s, _ := plotter.NewScatter(refs)
		s.Shape, s.Color = draw.CrossGlyph{}, color.Black
		p.Add(s)
		p.Legend.Add("reference", s)
		if err := save(p, dir, chart.file, 24*vg.Centimeter, 14*vg.Centimeter); err != nil {
			return err
		}
	}
	return nil
}

// herdChart draws arrivals per window over time, one panel per mode, for
// the first run of a herd configuration.
func herdChart(dir, file string, h herdRun, until time.Duration) error {
	rows := len(h.points)
	plots := make([][]*plot.Plot, rows)
	for i, pt := range h.points {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s (peak after recovery %d)", pt.Mode, pt.Runs[0].PeakAfter)
		if i == 0 {
			p.Title.Text = fmt.Sprintf("%s, arrivals per %v — %s", h.label, h.config.Window, p.Title.Text)
		}
		p.Y.Label.Text = "arrivals"
		if i == rows-1 {
			p.X.Label.Text = "time (s); grey: t1; dashed: capacity per window; earlier waves clipped at the top"
		}
		var xys plotter.XYs
		for w, a := range pt.Runs[0].Arrivals {
			t := time.Duration(w) * h.config.Window
			if t > until {
				break
			}
			xys = append(xys, plotter.XY{X: t.Seconds(), Y: float64(a)})
		}
		l, _ := plotter.NewLine(xys)
		l.Color = plotutil.Color(i)
		p.Add(l)
		capLine, _ := plotter.NewLine(plotter.XYs{{X: h.config.Recover.Seconds(), Y: float64(h.config.Capacity)}, {X: until.Seconds(), Y: float64(h.config.Capacity)}})
		capLine.Dashes, capLine.Color = []vg.Length{vg.Points(4), vg.Points(3)}, color.Black
		p.Add(capLine)
		t1, _ := plotter.NewLine(plotter.XYs{{X: h.config.Recover.Seconds(), Y: 0}, {X: h.config.Recover.Seconds(), Y: float64(h.config.N)}})
		t1.Color = color.Gray{Y: 128}
		p.Add(t1)
		// Scale to what happens after recovery; the outage's first waves
		// (up to 1.5·N in the first window) are clipped, except where the
		// herd itself is the point.
		p.X.Min, p.X.Max = 0, until.Seconds()
		p.Y.Min, p.Y.Max = 0, max(1.25*float64(pt.Runs[0].PeakAfter), 4*float64(h.config.Capacity))
		plots[i] = []*plot.Plot{p}
	}
	return panels(dir, file, plots, 24*vg.Centimeter, 5*vg.Centimeter)
}

// stormChart draws attempts per request against the failure rate for each
// budget, over 300 s.
func stormChart(dir string, cells []stormCell) error {
	p := plot.New()
	p.Title.Text = "Scenario C: attempts per request, 100 clients × 10 rps, 300 s, 4 attempts"
	p.X.Label.Text, p.Y.Label.Text = "failure rate (%)", "attempts per request"
	p.Legend.Top, p.Legend.Left = true, true
	for i, b := range sim.StormBudgets() {
		var xys plotter.XYs
		for _, c := range cells {
			if c.budget == b.Name && c.duration == 300*time.Second {
				xys = append(xys, plotter.XY{X: 100 * c.failure, Y: c.result.AttemptsPerRequest()})
			}
		}
		line(p, i, b.Name, xys, true)
	}
	p.Y.Min = 0.9
	return save(p, dir, "storm-attempts", 20*vg.Centimeter, 12*vg.Centimeter)
}

// metastableChart draws attempts sent and goodput per second, one panel per
// budget, first seed, over the first until of the run.
func metastableChart(dir string, rs []metaRun, until time.Duration) error {
	var plots [][]*plot.Plot
	for _, r := range rs {
		if r.seed != 1 {
			continue
		}
		p := plot.New()
		p.Title.Text = "budget: " + r.budget
		if len(plots) == 0 {
			p.Title.Text = "Scenario C2: Bronson's example, λ 280/s, μ 300/s, 10 s blip at t = 10 s — " + p.Title.Text
		}
		p.Y.Label.Text = "per second"
		p.Legend.Top = true
		for i, s := range []struct {
			what string
			xs   []int
		}{{"attempts sent", r.run.Sent}, {"goodput", r.run.Goodput}} {
			var xys plotter.XYs
			for sec, v := range s.xs {
				if time.Duration(sec)*time.Second > until {
					break
				}
				xys = append(xys, plotter.XY{X: float64(sec), Y: float64(v)})
			}
			line(p, i, s.what, xys, false)
		}
		// The data stay below 700/s; the room above holds the legend, so
		// it covers no line.
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, until.Seconds(), 0, 950
		p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 300, Label: "300"},
			{Value: 600, Label: "600"}, {Value: 900, Label: "900"}})
		plots = append(plots, []*plot.Plot{p})
	}
	plots[len(plots)-1][0].X.Label.Text = "time (s)"
	return panels(dir, "metastable", plots, 24*vg.Centimeter, 6*vg.Centimeter)
}

// panels draws plots stacked in one column into dir/file.
func panels(dir, file string, plots [][]*plot.Plot, w, each vg.Length) error {
	rows := len(plots)
	img, err := draw.NewFormattedCanvas(w, vg.Length(rows)*each, chartFormat)
	if err != nil {
		return err
	}
	canvases := plot.Align(plots, draw.Tiles{Rows: rows, Cols: 1, PadY: vg.Millimeter * 2, PadTop: vg.Millimeter,
		PadBottom: vg.Millimeter, PadRight: 4 * vg.Millimeter}, draw.New(img))
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(filepath.Join(dir, file+"."+chartFormat))
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
