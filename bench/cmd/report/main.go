// Command report runs httpretry's overhead benchmarks and the simulations
// of scenarios A, B, C and C2 (package sim) and the overload scenarios D,
// C2 on the Transport and E (sim's TestOverloadTable, run with go test),
// reads the loopback hedging results of cmd/hedgeload, then writes
// docs/performance.md and its charts in docs/img. Run it from the bench
// directory:
//
//	go run ./cmd/report                  # everything, a few minutes on two cores
//	go run ./cmd/report -bench=false     # reuse results/overhead.txt
//	go run ./cmd/report -overhead-only   # benchmarks, benchstat and ratios to stdout
//
// The benchmarks run in 12 rounds by default (-count): in each round every
// client runs in its own process, in an order turned by one each round
// (rounds.go). The report quotes medians, their spread, the per-round
// ratios to the bare transport (median and range) and benchstat on the
// interleaved samples.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/seedhq/httpretry/bench/hedgeload"
)

func main() {
	var (
		docs         = flag.String("docs", "../docs", "where performance.md and img/ are written")
		runs         = flag.Int("runs", 100, "scenario A: runs per point and seed")
		herdRuns     = flag.Int("herd-runs", 20, "scenario B: runs per mode")
		bench        = flag.Bool("bench", true, "run the overhead benchmarks (false: reuse -bench-file)")
		count        = flag.Int("count", 12, "benchmark rounds: each client once per round, in its own process")
		benchtime    = flag.String("benchtime", "1s", "benchmark -benchtime")
		benchFile    = flag.String("bench-file", "results/overhead.txt", "raw benchmark output")
		metricsFile  = flag.String("metrics-file", "results/metrics.txt", "raw output of the metrics benchmark")
		format       = flag.String("format", "svg", "chart format: svg, or png to inspect them")
		overheadOnly = flag.Bool("overhead-only", false, "run the benchmarks, print benchstat and the ratio table, write nothing else")
		hedgeFile    = flag.String("hedgeload", "results/hedgeload.jsonl", "loopback hedging results of cmd/hedgeload (section 6); left out if absent")
		overload     = flag.Bool("overload", true, "run the overload scenarios (go test -run TestOverloadTable ./sim; false: reuse -overload-file)")
		overloadFile = flag.String("overload-file", "results/overload.json", "the overload scenarios' figures, as TestOverloadTable writes them (section 7)")
	)
	flag.Parse()
	chartFormat = *format
	log.SetFlags(0)
	start := time.Now()

	if *bench || *overheadOnly {
		if err := os.MkdirAll(filepath.Dir(*benchFile), 0o755); err != nil {
			log.Fatal(err)
		}
		log.Printf("benchmarks: %d rounds, -benchtime %s → %s", *count, *benchtime, *benchFile)
		if err := runBenchmarks(".", *benchFile, *count, *benchtime); err != nil {
			log.Fatalf("benchmarks: %v", err)
		}
		log.Printf("metrics benchmarks: %d rounds → %s", *count, *metricsFile)
		if err := runMetricsBenchmarks(".", *metricsFile, *count, *benchtime); err != nil {
			log.Fatalf("metrics benchmarks: %v", err)
		}
	}
	var r report
	r.started = start
	if s, meta, err := parseBenchmarks(*benchFile); err == nil && len(s) > 0 {
		r.bench, r.benchMeta = s, meta
		if r.benchstat, err = benchstat(".", *benchFile); err != nil {
			log.Printf("benchstat: %v", err)
		}
	} else {
		log.Printf("no benchmark results in %s: the overhead section is left out", *benchFile)
	}
	if !*overheadOnly { // cheap (seconds) and about memory, not time: it runs even with -bench=false
		log.Print("per-host memory: BenchmarkHostStateMemory in the root module")
		hs, err := runHostStateMemory("..")
		if err != nil {
			log.Fatalf("per-host memory: %v", err)
		}
		r.hostState = hs
	}
	if s, _, err := parseSideBySide(*metricsFile, "BenchmarkMetricsOverhead"); err == nil && len(s) > 0 {
		r.metrics = s
	} else {
		log.Printf("no metrics benchmark results in %s: that table is left out", *metricsFile)
	}
	if *overheadOnly {
		fmt.Println(r.benchstat)
		fmt.Println(overheadTable(r.bench))
		if r.metrics != nil {
			fmt.Println(metricsTable(r.metrics))
		}
		return
	}

	if rs, err := hedgeload.ReadResults(*hedgeFile); err == nil {
		r.hedging = rs
	} else {
		log.Printf("no hedging results (%v): section 6 says how to make them", err)
	}

	simStart := time.Now()
	log.Printf("scenario A: %d runs per point and seed", *runs)
	r.occRuns, r.occ = *runs, runOCC(*runs)
	log.Printf("scenario B: %d runs per mode", *herdRuns)
	r.herds = runHerds(*herdRuns)
	log.Print("scenario C")
	r.storms = runStorms()
	log.Print("scenario C2")
	r.meta = runMetastable(900 * time.Second)
	if *overload {
		log.Printf("scenarios D, C2 on the Transport, E: TestOverloadTable → %s", *overloadFile)
		if err := os.MkdirAll(filepath.Dir(*overloadFile), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := runOverloadTable(".", *overloadFile); err != nil {
			log.Fatalf("overload scenarios: %v", err)
		}
	}
	if t, err := readOverloadTable(*overloadFile); err == nil {
		r.overload = t
	} else {
		log.Printf("no overload figures (%v): section 7 is left out", err)
	}
	r.simTime = time.Since(simStart)

	img := filepath.Join(*docs, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		log.Fatal(err)
	}
	for _, err := range []error{
		occCharts(img, r.occ),
		herdChart(img, "herd-arrivals", r.herds[0], 30*time.Second),
		stormChart(img, r.storms),
		metastableChart(img, r.meta, 300*time.Second),
		r.hedgingCharts(img),
	} {
		if err != nil {
			log.Fatalf("charts: %v", err)
		}
	}
	if r.overload != nil {
		if err := overloadCharts(img, r.overload); err != nil {
			log.Fatalf("charts: %v", err)
		}
	}
	out := filepath.Join(*docs, "performance.md")
	if err := os.WriteFile(out, []byte(r.markdown()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s and charts in %s (%v)", out, img, time.Since(start).Round(time.Second))
	for _, t := range r.targets() {
		if !t.met {
			log.Printf("target missed: %s: %s", t.name, t.measured)
		}
	}
}
