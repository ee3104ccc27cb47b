// Package invariants is TestInvariants, a model-based randomized test of
// httpretry's Transport, and its fuzz targets: the harness the root
// package's invariants_test.go runs (see Invariants). It is code for
// tests only: nothing of httpretry's imports it.
package invariants

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seedhq/httpretry"
)

// Options is how the harness reaches into a Transport where the public
// API does not: the root package's tests give it.
type Options struct {
	// SetHostLimit bounds the hosts tr keeps state for at n, before its
	// first use (export_test.go's SetHostLimit).
	SetHostLimit func(tr *httpretry.Transport, n int)
}

// Invariants is TestInvariants: a model-based randomized test of the Transport. Each
// scenario is drawn from a seed: a random policy (attempts, backoff,
// attempt timeout, keys, budget, breaker, hedging, hints, classifier,
// PrepareRetry, where the policy is set, per-request edits), one to six
// calls (method, body, caller's key, deadline, cancellation at a random
// point, how the URL writes its host and path) to one host or several
// over a small table of host state, and what each attempt meets: a
// scripted upstream (statuses from 1xx to 5xx, hostile Retry-After and
// rate-limit values, typed and untyped errors at a drawn httptrace stage,
// delays, bodies that trickle, break, never end or whose Close does not
// end a Read, answers that come after the attempt timed out), or a real
// net/http client and server over net.Pipe, maybe inside an http.Client,
// under a tracing layer and a signer. Request bodies are replayed through
// GetBody, Seek, an azcore-style GetBody that rewinds the caller's one
// stream, or a copy of what Base read, and may be live streams. User code
// may panic (Base, its response bodies, Classify, PrepareRetry), and
// PrepareRetry may call through the same Transport. Each scenario runs in
// its own testing/synctest bubble, and then every invariant is checked
// against a model of the documented behaviour (model.go and
// the checks of check.go and the files beside it),
// including, once every call has ended, that nothing is held. A goroutine
// still running once the calls have returned and their bodies are closed
// keeps the bubble from ending: that is reported as a violation of the
// scenario, with the goroutine's stack. A violation that the harness knows
// for a library defect starts with "library defect (name)", and a test of
// the root package reproduces it through the public API.
//
//	HTTPRETRY_SCENARIOS=N   run N scenarios (default: 100,000; 20,000 under -race)
//	HTTPRETRY_FIRST=S       seeds S, S+1, … (default 1)
//	HTTPRETRY_SEED=S        replay the scenario of seed S alone, with a trace
//	HTTPRETRY_REPORT=path   after a run without violations, write its figures
//	                        into the last section of path (docs/reliability.md)
//	HTTPRETRY_VIOLATIONS=path  write every violation to path, one a line,
//	                        after its seed (the test prints the first 40 seeds)
//	HTTPRETRY_SLOW=d        log the seeds whose scenario took longer than d
//
// It prints "invariants: N scenarios, M violations" (go test -v), and
// its progress every tenth of a run of a million or more.
func Invariants(t *testing.T, o Options) {
	if s := os.Getenv("HTTPRETRY_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HTTPRETRY_SEED=%q: %v", s, err)
		}
		sc := newScenario(seed, o)
		t.Logf("seed %d: %s", seed, sc.describe())
		traceTo = func(s string) { t.Logf("trace:\n%s", s) }
		defer func() { traceTo = nil }()
		vs := runScenario(t, sc)
		for _, v := range vs {
			t.Errorf("seed %d: %s", seed, v)
		}
		t.Logf("invariants: 1 scenarios, %d violations", len(vs))
		return
	}
	n := envCount(t, "HTTPRETRY_SCENARIOS", defaultScenarios)
	if testing.Short() && os.Getenv("HTTPRETRY_SCENARIOS") == "" {
		n = 2000
	}
	first := envCount(t, "HTTPRETRY_FIRST", 1)
	var slow time.Duration
	if v := os.Getenv("HTTPRETRY_SLOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("HTTPRETRY_SLOW=%q: %v", v, err)
		}
		slow = d
	}
	var (
		mu     sync.Mutex
		failed = map[uint64][]string{}
		next   atomic.Uint64
	)
	begin := time.Now()
	workers := runtime.GOMAXPROCS(0)
	t.Run("scenarios", func(t *testing.T) {
		for w := range workers {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				for {
					i := next.Add(1) - 1
					if i >= n {
						return
					}
					seed := first + i
					if n >= 1_000_000 && (i+1)%(n/10) == 0 {
						t.Logf("invariants: %d of %d scenarios played, %v", i+1, n, time.Since(begin).Round(time.Second))
					}
					began := time.Now()
					vs := runScenario(t, newScenario(seed, o))
					if slow > 0 && time.Since(began) > slow {
						t.Logf("seed %d took %v", seed, time.Since(began).Round(time.Millisecond))
					}
					if len(vs) > 0 {
						mu.Lock()
						failed[seed] = vs
						mu.Unlock()
					}
				}
			})
		}
	})
	took := time.Since(begin)
	seeds := slices.Sorted(func(yield func(uint64) bool) {
		for s := range failed {
			if !yield(s) {
				return
			}
		}
	})
	total := 0
	for i, seed := range seeds {
		total += len(failed[seed])
		if i < 40 {
			t.Errorf("seed %d: %s\n\tscenario: %s\n\treplay: HTTPRETRY_SEED=%d go test -run '^TestInvariants$' -v .",
				seed, strings.Join(failed[seed], "\n\t"), newScenario(seed, o).describe(), seed)
		}
	}
	if path := os.Getenv("HTTPRETRY_VIOLATIONS"); path != "" {
		var b strings.Builder
		for _, seed := range seeds {
			for _, v := range failed[seed] {
				fmt.Fprintf(&b, "%d\t%s\n", seed, strings.ReplaceAll(v, "\n", " | "))
			}
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Errorf("HTTPRETRY_VIOLATIONS: %v", err)
		}
	}
	if len(seeds) > 40 {
		t.Errorf("… and %d more scenarios with violations", len(seeds)-40)
	}
	t.Logf("invariants: %d scenarios, %d violations (%d scenarios broke one; seeds %d to %d; %d workers, %v, %.0f scenarios/s)\n\tcovered: %s",
		n, total, len(seeds), first, first+n-1, workers, took.Round(time.Millisecond), float64(n)/took.Seconds(), coverageString())
	if path := os.Getenv("HTTPRETRY_REPORT"); path != "" && total == 0 && !t.Failed() {
		if err := writeReport(path, n, first, workers, took); err != nil {
			t.Errorf("HTTPRETRY_REPORT: %v", err)
		}
	}
}

// runScenario plays s in a bubble of its own and returns its violations.
func runScenario(t *testing.T, s *scenario) []string {
	return inBubble(t, func() []string { return playSafely(s) })
}

// inBubble runs f in a synctest bubble of its own and returns the
// violations it reports, and one more if goroutines it started are still
// there when it returns.
func inBubble(t *testing.T, f func() []string) (vs []string) {
	var bubble string
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if err, ok := p.(error); ok && strings.HasPrefix(err.Error(), "deadlock: main bubble goroutine has exited") {
			vs = append(vs, "goroutines left running once the calls returned and their bodies were closed:\n"+leaked(bubble))
			return
		}
		vs = append(vs, fmt.Sprintf("panic: %v", p))
	}()
	synctest.Test(t, func(*testing.T) {
		bubble = bubbleID()
		vs = f()
	})
	return vs
}

// ReportLeaks is TestInvariantsReportLeaks: a goroutine left behind is a violation of
// the scenario that left it, with its stack, not a crash of the test.
func ReportLeaks(t *testing.T) {
	vs := inBubble(t, func() []string {
		block := make(chan struct{}) // of the bubble, so that waiting on it is durable
		go func() { <-block }()
		return nil
	})
	if len(vs) != 1 || !strings.Contains(vs[0], "goroutines left running") || !strings.Contains(vs[0], "ReportLeaks") {
		t.Fatalf("violations %q, want one naming the leaked goroutine", vs)
	}
	if vs := inBubble(t, func() []string { return nil }); len(vs) != 0 {
		t.Fatalf("violations %q from a bubble that leaks nothing", vs)
	}
}

// playSafely plays s, turning a panic of the harness's own into a
// violation so that one scenario cannot end the whole test.
func playSafely(s *scenario) (vs []string) {
	defer func() {
		if p := recover(); p != nil {
			vs = append(vs, fmt.Sprintf("panic while playing the scenario: %v\n%s", p, debug.Stack()))
		}
	}()
	return play(s)
}

var bubbleRE = regexp.MustCompile(`synctest bubble (\d+)`)

// bubbleID returns the id of the calling goroutine's synctest bubble, as
// goroutine stacks show it.
func bubbleID() string {
	buf := make([]byte, 256)
	buf = buf[:runtime.Stack(buf, false)]
	line, _, _ := bytes.Cut(buf, []byte("\n"))
	if m := bubbleRE.FindSubmatch(line); m != nil {
		return string(m[1])
	}
	return "?"
}

// leaked returns the stacks of the goroutines left in bubble, shortened.
func leaked(bubble string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "synctest bubble "+bubble+"]") {
			continue
		}
		lines := strings.Split(g, "\n")
		out = append(out, "\t\t"+strings.Join(lines[:min(len(lines), 13)], "\n\t\t"))
		if len(out) == 4 {
			break
		}
	}
	if len(out) == 0 {
		return "\t\t(stacks not found)"
	}
	return strings.Join(out, "\n")
}

func envCount(t *testing.T, name string, def uint64) uint64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}
