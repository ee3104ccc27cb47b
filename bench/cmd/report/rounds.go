package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/seedhq/httpretry/bench/rounds"
)

// Side-by-side benchmarks run in rounds (package rounds): every client in
// a process of its own, the order turned every round. Ratios are taken
// within a round and reported as their median and range over the rounds.

// testBinary compiles the tests of the package in dir into out.
func testBinary(dir, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "test", "-c", "-o", abs, ".")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	return cmd.Run()
}

// runRounds runs, for each of n rounds and each variant in that
// round's order, the test binary bin in dir with args(variant), appending
// its output to w after a line naming the round and variant (a line
// benchstat ignores).
func runRounds(dir, bin string, n int, variants []string, args func(variant string) []string, w io.Writer) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	return rounds.Each(n, variants, func(r int, v string) error {
		fmt.Fprintf(w, "round %d variant %s\n", r+1, v)
		cmd := exec.Command(abs, args(v)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, w, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("round %d, %s: %w", r+1, v, err)
		}
		return nil
	})
}

// overheadArgs runs BenchmarkOverhead's cases for one client, once.
func overheadArgs(benchtime string) func(client string) []string {
	return func(client string) []string {
		return []string{"-test.run", "^$", "-test.bench", "^BenchmarkOverhead$/./^client=" + client + "$",
			"-test.benchmem", "-test.count", "1", "-test.benchtime", benchtime}
	}
}

// roundRatios returns, for each round, client's value of unit over bare's
// in that round; nil when the rounds do not line up (a client is missing
// from some round).
func (s benchSamples) roundRatios(c, client, unit string) []float64 {
	return s.ratiosTo(c, client, "bare", unit)
}

// ratiosTo returns, for each round, client's value of unit over base's in
// that round; nil when the rounds do not line up.
func (s benchSamples) ratiosTo(c, client, base, unit string) []float64 {
	xs, bare := s[c][client][unit], s[c][base][unit]
	if len(xs) == 0 || len(xs) != len(bare) {
		return nil
	}
	out := make([]float64, len(xs))
	for i := range xs {
		out[i] = xs[i] / bare[i]
	}
	return out
}

// ratioSpread formats the median of the per-round ratios and their range.
func ratioSpread(rs []float64) string {
	if len(rs) == 0 {
		return "–"
	}
	s := rounds.Of(rs)
	return fmt.Sprintf("%.2f [%.2f–%.2f]", s.Median, s.Min, s.Max)
}
