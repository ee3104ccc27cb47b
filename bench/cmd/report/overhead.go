package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/seedhq/httpretry/bench/sim"
)

// benchstatCmd is the benchstat the report runs, at a pinned version.
const benchstatCmd = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

var (
	benchCases   = []string{"get", "get-parallel", "post-1MiB-getbody", "post-1MiB-opaque", "post-8MiB-opaque"}
	benchClients = []string{"bare", "httpretry", "retryablehttp", "failsafehttp"}
)

// runBenchmarks runs BenchmarkOverhead in count rounds, each client in a
// process of its own and the order turned every round (rounds.go), into
// file.
func runBenchmarks(dir, file string, count int, benchtime string) error {
	return runBenchRounds(dir, file, count, benchClients, overheadArgs(benchtime))
}

// runBenchRounds builds the bench test binary and runs it in count rounds,
// once per client per round with args(client), into file.
func runBenchRounds(dir, file string, count int, clients []string, args func(string) []string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	bin := filepath.Join(filepath.Dir(file), "bench.test")
	if err := testBinary(dir, bin); err != nil {
		return err
	}
	return runRounds(dir, bin, count, clients, args, f)
}

// benchstat runs benchstat on file with the clients as columns, so each
// column is compared with the first, the bare transport.
func benchstat(dir, file string) (string, error) {
	cmd := exec.Command("go", "run", benchstatCmd, "-col", "/client", file)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err := cmd.Run()
	return out.String(), err
}

// benchSamples maps case → client → unit → samples.
type benchSamples map[string]map[string]map[string][]float64

// benchLine matches a result line of the side-by-side benchmark name:
// "<name>/case=<case>/client=<client>[-N] <iterations> <value unit>...".
func benchLine(name string) *regexp.Regexp {
	return regexp.MustCompile(`^` + name + `/case=([^/]+)/client=(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
}

// parseBenchmarks reads the go test -bench output of BenchmarkOverhead.
func parseBenchmarks(file string) (benchSamples, map[string]string, error) {
	return parseSideBySide(file, "BenchmarkOverhead")
}

// parseSideBySide reads the go test -bench output of the side-by-side
// benchmark name.
func parseSideBySide(file, name string) (benchSamples, map[string]string, error) {
	line := benchLine(name)
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	s := benchSamples{}
	meta := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := sc.Text()
		if k, v, ok := strings.Cut(text, ": "); ok && (k == "cpu" || k == "goos" || k == "goarch") {
			meta[k] = v
		}
		m := line.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			if s[m[1]] == nil {
				s[m[1]] = map[string]map[string][]float64{}
			}
			if s[m[1]][m[2]] == nil {
				s[m[1]][m[2]] = map[string][]float64{}
			}
			s[m[1]][m[2]][fields[i+1]] = append(s[m[1]][m[2]][fields[i+1]], v)
		}
	}
	return s, meta, sc.Err()
}

// median returns the median of a client's samples of unit, or NaN.
func (s benchSamples) median(c, client, unit string) float64 {
	return sim.Median(s[c][client][unit])
}

// spread is the half-range of the samples relative to their median: how far
// apart the repeated runs landed.
func (s benchSamples) spread(c, client, unit string) float64 {
	xs := s[c][client][unit]
	if len(xs) == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / 2 / sim.Median(xs)
}

// overheadTable renders the medians and their ratios to the bare transport:
// for time, the median and range of the ratios within each round.
func overheadTable(s benchSamples) string {
	var b strings.Builder
	b.WriteString("| case | client | ns/op (median ± half-range) | × bare (per round: median [min–max]) | B/op | × bare | allocs/op | × bare |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range benchCases {
		if s[c] == nil {
			continue
		}
		for _, cl := range benchClients {
			ns, bytes, allocs := s.median(c, cl, "ns/op"), s.median(c, cl, "B/op"), s.median(c, cl, "allocs/op")
			fmt.Fprintf(&b, "| %s | %s | %s ± %.0f %% | %s | %s | %s | %.0f | %s |\n", c, cl,
				fmtNum(ns), 100*s.spread(c, cl, "ns/op"), ratioSpread(s.roundRatios(c, cl, "ns/op")),
				fmtNum(bytes), ratio(bytes, s.median(c, "bare", "B/op")),
				allocs, ratio(allocs, s.median(c, "bare", "allocs/op")))
		}
	}
	return b.String()
}

func ratio(v, bare float64) string {
	if bare == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v/bare)
}

// fmtNum prints a count with thin thousands separators.
func fmtNum(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
