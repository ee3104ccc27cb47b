package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The figures that docs/reliability.md is made of. Tests log each figure
// (visible with -v) and keep it here; TestMain writes them to the file named
// by E2E_REPORT after a run in which every test passed.
var figures = struct {
	sync.Mutex
	lines map[string][]string // section → markdown lines
	skips []string
}{lines: map[string][]string{}}

// The report's sections, in order.
var sections = []string{
	"Soak under flapping faults",
	"Faults from toxiproxy",
	"Gateway: nginx",
	"HTTP/2 over TLS",
	"Hostile headers",
	"Hostile bodies",
	"Uploads",
	"Hostile responses",
	"Hostile URLs and policies",
	"Wedged connection",
	"Another address",
	"Regional failover",
	"Hedging across endpoints",
	"Resume",
	"Small bodies",
	fleetSection,
	knownProblems,
}

// knownProblems is the section where tests report a behaviour of the
// transport that they found wrong; it may be empty.
const knownProblems = "Known problems"

// figure logs one line of a section of the report.
func figure(t testing.TB, section, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	if !slices.Contains(sections, section) {
		panic("unknown report section " + section)
	}
	figures.Lock()
	figures.lines[section] = append(figures.lines[section], line)
	figures.Unlock()
}

// skipf skips t and records why, so that the report says what did not run.
func skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	figures.Lock()
	figures.skips = append(figures.skips, t.Name()+": "+msg)
	figures.Unlock()
	t.Skip(msg)
}

// writeReport writes docs/reliability.md when E2E_REPORT names it. A
// partial run (-run, -short) writes nothing: the figures would be missing.
func writeReport(total time.Duration) error {
	path := os.Getenv("E2E_REPORT")
	if path == "" {
		return nil
	}
	figures.Lock()
	defer figures.Unlock()
	for _, s := range sections {
		if len(figures.lines[s]) == 0 && s != knownProblems {
			return fmt.Errorf("no figures for %q: run the whole suite to write %s", s, path)
		}
	}
	var b strings.Builder
	b.WriteString(reportHeader)
	fmt.Fprintf(&b, "Ran on %s, %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	fmt.Fprintf(&b, "The whole suite (%s) took **%s** with the race detector %s.\n",
		"`go test -race -count=1 -v ./...` in e2e/", total.Round(time.Second), raceState())
	if _, stuck := countGoroutines(); stuck > 0 {
		fmt.Fprintf(&b, "toxiproxy v2.5.0 left %d goroutine(s) of its own stuck after its proxies were deleted (its leak: a toxic stub blocked sending to a link whose writer had exited); the goroutine checks leave toxiproxy's goroutines out.\n", stuck)
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s)
		if len(figures.lines[s]) == 0 {
			b.WriteString("None found.\n")
		}
		for _, l := range figures.lines[s] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	b.WriteString("\n## Skipped\n\n")
	if len(figures.skips) == 0 {
		b.WriteString("Nothing was skipped.\n")
	}
	for _, s := range figures.skips {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString(reportFooter)
	b.WriteString(keptSection(path))
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// invariantsHeading starts the last section of the report, which the root
// module's TestInvariants writes and this suite keeps as it is.
const invariantsHeading = "## Randomized invariants"

// keptSection returns the section of the file at path that TestInvariants
// wrote, preceded by a blank line, or "" if there is none.
func keptSection(path string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	i := strings.Index(string(old), "\n"+invariantsHeading+"\n")
	if i < 0 {
		return ""
	}
	return "\n" + string(old[i+1:])
}

const reportHeader = `# Reliability: figures from the end-to-end suite

This file is written by the e2e suite, except its last section, which the
root module's TestInvariants writes; do not edit it by hand. To produce it
again, on any machine with Go and nginx:

` + "```sh" + `
cd e2e && E2E_REPORT=../docs/reliability.md go test -race -count=1 -v ./...
` + "```" + `

Every figure below is measured by the test named in e2e/ and checked there:
a run in which any check fails writes nothing. Faults are real: a toxiproxy
server in the test process between client and server, nginx in front of a
Go upstream that the tests kill and restart, Go's own HTTP/2 server shut down
under load. All traffic stays on loopback.

`

const reportFooter = `
## How to read these figures

- *Outcomes* count logical requests (one call of RoundTrip each): every one
  ends with exactly one response or one error, never both, never neither.
- *Attempts* count what httpretry sent (Transport.OnAttempt); net/http's
  own hidden retries (HTTP/1 on a reused connection, HTTP/2 REFUSED_STREAM
  and GOAWAY) are counted apart, from httptrace's GotConn.
- *Applied* counts what the payment-like upstream did: a POST with an
  Idempotency-Key is applied once per key and a repeat gets the stored
  answer; a POST without one (sent by a Transport with keys disabled) is
  applied every time it arrives, so an unkeyed POST applied twice would be a
  double payment.
- *Known problems* lists what the suite found the transport doing wrong in
  this run; each is also a test failure, so a run that writes this file
  has none.
`

// machine describes the computer the suite ran on.
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
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	ng := "no nginx"
	if bin, err := nginxBinary(); err == nil {
		if out, err := exec.Command(bin, "-v").CombinedOutput(); err == nil {
			ng = strings.TrimSpace(strings.TrimPrefix(string(out), "nginx version: "))
		}
	}
	return fmt.Sprintf("%s/%s, %d cores (%s), %s, Linux %s, %s",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu, runtime.Version(),
		strings.TrimSpace(string(kernel)), ng)
}

func raceState() string {
	if raceEnabled {
		return "on"
	}
	return "off"
}

// TestReportKeepsTheInvariantsSection: rewriting the report keeps the
// section that TestInvariants wrote, and only that.
func TestReportKeepsTheInvariantsSection(t *testing.T) {
	path := t.TempDir() + "/reliability.md"
	section := invariantsHeading + "\n\n- 10 scenarios, 0 violations\n"
	if err := os.WriteFile(path, []byte("# Old\n\n## Soak\n\n- old figure\n\n"+section), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keptSection(path); got != "\n"+section {
		t.Fatalf("kept %q, want %q", got, "\n"+section)
	}
	if got := keptSection(t.TempDir() + "/missing.md"); got != "" {
		t.Fatalf("kept %q from a missing file", got)
	}
}
