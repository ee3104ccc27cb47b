package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// The per-host memory benchmark: BenchmarkHostStateMemory in the root
// package sends one request to each of a million distinct hosts that only
// succeed and reports the heap's growth, per policy.

var hostStateLine = regexp.MustCompile(`^BenchmarkHostStateMemory/(\S+?)(?:-\d+)?\s+\d+\s+.*?([\d.]+) heap-MiB/1M-hosts`)

// runHostStateMemory runs the benchmark in the root module (dir) and
// returns heap growth in MiB by policy.
func runHostStateMemory(dir string) (map[string]float64, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkHostStateMemory$", "-benchtime", "1x", "-count", "1", ".")
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	res := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := hostStateLine.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err == nil {
				res[m[1]] = v
			}
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no BenchmarkHostStateMemory results in:\n%s", out)
	}
	return res, sc.Err()
}

var hostStatePolicies = []string{"default-budget", "no-budget", "breaker"}

func (r *report) hostStateSection(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### Per-host state of hosts that only succeed\n\n")
	if r.hostState == nil {
		w("No results (the report ran with `-bench=false`).\n\n")
		return
	}
	w("`BenchmarkHostStateMemory` (root package, `hoststate_test.go`) sends one request to each of\n")
	w("1,000,000 distinct hosts that answer 200 and reports the live heap's growth after a GC: a host that\n")
	w("has only succeeded holds no per-host state, since a full budget and a closed breaker with no failures\n")
	w("behave exactly like new ones. Hosts that failed keep state up to 10,000 hosts, dropped at rest after a\n")
	w("minute and idle after ten.\n\n| policy | heap growth for 1,000,000 hosts |\n|---|---|\n")
	for _, p := range hostStatePolicies {
		if v, ok := r.hostState[p]; ok {
			w("| %s | %.3f MiB |\n", p, v)
		}
	}
	w("\n")
}

func (r *report) hostStateTargets() []target {
	worst := 0.0
	for _, v := range r.hostState {
		worst = max(worst, v)
	}
	return []target{{"per-host state, 1,000,000 hosts that only succeed", "heap growth ≤ 8 MiB", fmt.Sprintf("%.3f MiB at most, over %d policies", worst, len(r.hostState)), worst <= 8}}
}
