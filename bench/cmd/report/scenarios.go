package main

import (
	"runtime"
	"sync"
	"time"

	"github.com/seedhq/httpretry/bench/sim"
)

// occSeeds are the two run seeds of scenario A, named after the reference's
// (the generators differ, so the numbers are labels, not a replay).
var occSeeds = []uint64{2015, 42}

// occResult holds scenario A for one mode and client count: each seed's
// point and the pooled means over both.
type occResult struct {
	mode       string
	clients    int
	perSeed    []sim.OCCPoint
	calls      float64 // pooled mean
	makespan   float64 // pooled mean, ms
	callsSD    float64 // sd over all runs
	makespanSD float64
}

// runOCC runs scenario A: every mode, every client count, runs per seed.
func runOCC(runs int) []occResult {
	type job struct {
		i int
		m sim.Mode
		c int
	}
	var jobs []job
	for _, m := range sim.OCCModes() {
		for _, c := range sim.OCCClientCounts() {
			jobs = append(jobs, job{len(jobs), m, c})
		}
	}
	out := make([]occResult, len(jobs))
	parallel(len(jobs), func(k int) {
		j := jobs[k]
		r := occResult{mode: j.m.Name, clients: j.c}
		var calls, span []float64
		for _, s := range occSeeds {
			p := sim.RunOCCPoint(j.m, j.c, runs, s)
			r.perSeed = append(r.perSeed, p)
			calls = append(calls, p.Calls.Mean)
			span = append(span, p.Makespan.Mean)
			r.callsSD = max(r.callsSD, p.Calls.SD)
			r.makespanSD = max(r.makespanSD, p.Makespan.SD)
		}
		r.calls, r.makespan = mean(calls), mean(span)
		out[j.i] = r
	})
	return out
}

// herdRun is one configuration of scenario B with every mode.
type herdRun struct {
	label  string
	config sim.HerdConfig
	runs   int
	points []sim.HerdPoint
}

func runHerds(runs int) []herdRun {
	big := sim.DefaultHerd(30 * time.Second)
	big.N = 10000
	hs := []herdRun{
		{label: "N = 1000, t1 = 5 s", config: sim.DefaultHerd(5 * time.Second), runs: runs},
		{label: "N = 1000, t1 = 30 s", config: sim.DefaultHerd(30 * time.Second), runs: runs},
		{label: "N = 10000, t1 = 30 s", config: big, runs: max(runs/4, 2)},
	}
	modes := sim.HerdModes()
	for i := range hs {
		hs[i].points = make([]sim.HerdPoint, len(modes))
		parallel(len(modes), func(k int) {
			hs[i].points[k] = sim.RunHerdPoint(modes[k], hs[i].config, hs[i].runs, 1)
		})
	}
	return hs
}

// stormCell is scenario C for one budget, failure rate and duration.
type stormCell struct {
	budget   string
	failure  float64
	duration time.Duration
	result   sim.StormResult
}

var stormDurations = []time.Duration{60 * time.Second, 300 * time.Second}

func runStorms() []stormCell {
	var cells []stormCell
	for _, d := range stormDurations {
		for _, b := range sim.StormBudgets() {
			for _, f := range sim.StormFailures() {
				cells = append(cells, stormCell{budget: b.Name, failure: f, duration: d})
			}
		}
	}
	budgets := map[string]sim.StormBudget{}
	for _, b := range sim.StormBudgets() {
		budgets[b.Name] = b
	}
	parallel(len(cells), func(k int) {
		c := &cells[k]
		cfg := sim.DefaultStorm(c.failure, c.duration)
		cfg.NewBudget = budgets[c.budget].New
		c.result = sim.RunStorm(cfg, 1)
	})
	return cells
}

// metaRun is scenario C2 for one budget and seed.
type metaRun struct {
	budget string
	seed   uint64
	config sim.MetastableConfig
	run    sim.MetastableRun
}

func runMetastable(d time.Duration) []metaRun {
	var rs []metaRun
	for _, b := range sim.StormBudgets() {
		for _, seed := range []uint64{1, 2} {
			c := sim.DefaultMetastable(d)
			c.NewBudget = b.New
			rs = append(rs, metaRun{budget: b.Name, seed: seed, config: c})
		}
	}
	parallel(len(rs), func(k int) { rs[k].run = sim.RunMetastable(rs[k].config, rs[k].seed) })
	return rs
}

// parallel calls f(0…n−1) on as many goroutines as there are CPUs.
func parallel(n int, f func(int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for k := range next {
				f(k)
			}
		})
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
