package invariants

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// reportHeading starts the section of docs/reliability.md that
// TestInvariants writes. It is the file's last section: the e2e suite,
// which writes the rest of the file, keeps it as it is.
const reportHeading = "## Randomized invariants"

// writeReport replaces the section of the report at path (or appends it)
// with the figures of a run of n scenarios from seed first that found no
// violation.
func writeReport(path string, n, first uint64, workers int, took time.Duration) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(old)
	if i := strings.Index(doc, "\n"+reportHeading+"\n"); i >= 0 {
		doc = doc[:i]
	}
	doc = strings.TrimRight(doc, "\n") + "\n"
	var b strings.Builder
	b.WriteString(doc)
	b.WriteString("\n" + reportHeading + "\n\n")
	b.WriteString(reportIntro)
	fmt.Fprintf(&b, "HTTPRETRY_SCENARIOS=%d HTTPRETRY_REPORT=docs/reliability.md go test -run '^TestInvariants$' -count=1 -timeout 0 -v .\n```\n\n", n)
	fmt.Fprintf(&b, "Ran on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	fmt.Fprintf(&b, "- **%d scenarios, 0 violations** (seeds %d to %d), race detector %s, %d workers, in %s (%.0f scenarios/s).\n",
		n, first, first+n-1, raceState(), workers, took.Round(time.Second), float64(n)/took.Seconds())
	fmt.Fprintf(&b, "- Exercised: %s.\n", coverageString())
	b.WriteString(reportBody)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

const reportIntro = "This section is written by `TestInvariants` in the root module\n" +
	"(invariants_test.go), after a run without violations; the e2e suite keeps it\n" +
	"when it writes the rest of the file. To produce it again:\n\n```sh\n"

const reportBody = `- Each scenario draws, from its seed, a Transport's policy (attempts from 1
  to math.MaxInt, backoff, attempt timeout, idempotency keys, attempt header,
  budget, breaker, hedging fixed or adaptive, overload controls, hints,
  classifier, PrepareRetry, and where the policy is set, path keys included),
  one to six calls through it (method, body, caller's key under any casing,
  deadline, cancellation before, during an attempt, during a wait or at a
  random time, per-request edits, the host written as an FQDN, in mixed case
  or with its port), to one host or to several through a table of host
  state bounded at one to three (SetHostLimit), and what each attempt meets:
  a scripted upstream (statuses from 1xx to 5xx, hostile Retry-After,
  RateLimit and reset values, typed and untyped errors at a drawn httptrace
  stage, delays, bodies that trickle, break, never end or whose Close does not
  end a Read, answers that come after the attempt timed out), or a real
  net/http client and server over net.Pipe in the bubble, maybe in an
  http.Client with CheckRedirect, under an otelhttp-style tracing layer and a
  signer that reads GetBody and may fail first. Request bodies are replayed
  through GetBody, Seek (one that cannot move included), an azcore-style
  GetBody that rewinds the caller's one stream, or a copy as Base reads it,
  and may be live io.Pipe streams. User code panics now and then (Base's
  RoundTrip, plain and hedged, a response body's Read and Close, Classify,
  PrepareRetry), PrepareRetry may call through the same Transport, and some
  scenarios play a long announced pause, its probes and its 24 h bound. Each
  plays in a testing/synctest bubble of its own, then is checked against a
  model of the documented behaviour: no panic but the user code's, which
  reaches its caller's goroutine with its value; the caller's request
  untouched and each of its bodies closed once; every response body closed
  once, or returned and readable to its end; every body the server or a
  signer received is the caller's bytes, or the attempt failed; an unkeyed
  POST or PATCH never sent again after an attempt the server may have
  processed; a response returned if and only if one was in hand and not
  retried away; RoundTrip back by the caller's deadline or cancellation, on
  the bubble's clock; attempts within MaxAttempts, one OnAttempt each, one
  OnCall telling what was returned; keys and attempt numbers on every
  attempt; unknown errors judged by httptrace progress; server-set waits
  obeyed and bounded; PrepareRetry run before the waits for admission; the
  breaker's and the budget's levels as the model computes them; no host's
  protection lost to other hosts' traffic; once every call has ended, no slot,
  place in a queue, breaker trial or hedge token held, and a GET a day later
  let through at once; no goroutine left once the calls returned and their
  bodies were closed.
- Any scenario replays alone, with a trace of its attempts:
  ` + "`HTTPRETRY_SEED=<seed> go test -run '^TestInvariants$' -v .`" + `
- CI plays seeds 1 to 100,000 without the race detector and 1 to 20,000 with
  it on every run (.ci/run), and the fuzz targets FuzzInvariantsHeaders and
  FuzzInvariantsResponseHead feed hostile header values and status lines
  through the same checker.
- Defects it found, each fixed with the regression test named: a hedged
  round sized its buffer by MaxAttempts (40 GiB for 2^30; math.MaxInt
  panicked) (TestHedgingWithHugeMaxAttempts, TestHedgingWithMaxIntAttempts);
  a failure drained in the middle of a hedged round held back the other
  attempts' answers by up to 250 ms (TestRoundIsNotHeldUpByAFailure); a
  retry refused after the caller's context ended lost errors.Is(err,
  context.Canceled) (TestRefusedRetryAfterTheContextEnded); a 101 to be
  retried was returned as an in-memory copy when the retry was refused
  (TestSwitchedProtocolIsNeverKeptInMemory); calls needing their host's
  state at once each called NewBudget for it, after failing together or, with
  an overload control, at their first request (TestNewBudgetOncePerHost); a
  ratio budget refunded a retry in a later slot than it counted it, and then
  allowed more retries than its ratio (TestRatioRefundLaterThanTheRetry).
`

// machine describes the computer the run was on.
func machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%s/%s, %d cores (%s), %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu, runtime.Version())
}

func raceState() string {
	if raceEnabled {
		return "on"
	}
	return "off"
}
