// Command testsummary turns `go test -json` into what `go test` prints
// without -json, and keeps a record of every test's outcome so that
// scripts/test can end with a summary that names each skipped test and
// says why it was skipped.
//
//	go test -json ./... | testsummary -record FILE   # the usual output; outcomes appended to FILE
//	testsummary -report FILE                         # skipped tests and "N passed, N failed, N skipped"
//
// With -v the output is go test -v's. Lines that are not JSON (a build
// error, say) are printed as they come.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// outcome is one test's result, as recorded between the two modes.
type outcome struct {
	Action  string `json:"action"` // pass, fail or skip
	Package string `json:"package"`
	Test    string `json:"test"`
	Reason  string `json:"reason,omitempty"` // what a skipped test said
}

func main() {
	record := flag.String("record", "", "append each test's outcome to this file")
	report := flag.String("report", "", "print the summary of the outcomes in this file")
	verbose := flag.Bool("v", false, "print every test's output, as go test -v does")
	flag.Parse()
	if *report != "" {
		f, err := os.Open(*report)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		if err := summarize(os.Stdout, f); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		return
	}
	out := io.Discard
	if *record != "" {
		f, err := os.OpenFile(*record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		out = f
	}
	if err := render(os.Stdout, out, os.Stdin, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
}

// render reads go test -json from in and writes to w what go test would
// have printed (go test -v's output if verbose), and one JSON outcome per
// finished test to rec.
func render(w, rec io.Writer, in io.Reader, verbose bool) error {
	held := map[string][]string{}   // package + test → output not yet printed
	testFailed := map[string]bool{} // packages with a failed test
	enc := json.NewEncoder(rec)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(w, line)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "output" && e.Test == "":
			if verbose || strings.TrimSpace(e.Output) != "PASS" {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "output" || e.Action == "build-output":
			if verbose || e.Action == "build-output" {
				fmt.Fprint(w, e.Output)
			} else {
				held[key] = append(held[key], e.Output)
			}
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			o := outcome{Action: e.Action, Package: e.Package, Test: e.Test}
			if e.Action == "skip" {
				o.Reason = skipReason(held[key])
			}
			if e.Action == "fail" {
				testFailed[e.Package] = true
				if !verbose {
					fmt.Fprint(w, withoutProgress(held[key]))
				}
			}
			delete(held, key)
			if err := enc.Encode(o); err != nil {
				return err
			}
		case e.Test == "" && e.Action == "fail":
			// A test that never finished (a panic, a timeout): show what it said.
			for k, lines := range held {
				if strings.HasPrefix(k, e.Package+"\x00") {
					fmt.Fprint(w, withoutProgress(lines))
					delete(held, k)
				}
			}
			if !testFailed[e.Package] { // it failed to build, or crashed
				if err := enc.Encode(outcome{Action: "fail", Package: e.Package}); err != nil {
					return err
				}
			}
		}
	}
	return sc.Err()
}

// withoutProgress joins a test's output lines without go test -v's
// "=== RUN" (PAUSE, CONT) lines, which plain go test does not print.
func withoutProgress(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if !strings.HasPrefix(l, "=== ") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// skipReason is what a skipped test logged, without the framework's lines.
func skipReason(lines []string) string {
	var said []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if _, rest, ok := strings.Cut(t, ": "); ok && strings.Contains(t[:len(t)-len(rest)], ".go:") {
			t = rest // drop the file:line prefix
		}
		said = append(said, t)
	}
	if len(said) == 0 {
		return "no reason given"
	}
	return strings.Join(said, "; ")
}

// summarize reads recorded outcomes and writes the skipped tests, the
// failed ones and a closing line "N passed, N failed, N skipped".
func summarize(w io.Writer, in io.Reader) error {
	var passed int
	var failed, skipped []outcome
	dec := json.NewDecoder(in)
	for {
		var o outcome
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		switch o.Action {
		case "pass":
			passed++
		case "fail":
			failed = append(failed, o)
		case "skip":
			skipped = append(skipped, o)
		}
	}
	byName := func(s []outcome) {
		sort.Slice(s, func(i, j int) bool {
			if s[i].Package != s[j].Package {
				return s[i].Package < s[j].Package
			}
			return s[i].Test < s[j].Test
		})
	}
	byName(skipped)
	byName(failed)
	fmt.Fprintln(w)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "Skipped (%d):\n", len(skipped))
		for _, o := range skipped {
			fmt.Fprintf(w, "  %s %s: %s\n", o.Package, o.Test, o.Reason)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "Failed (%d):\n", len(failed))
		for _, o := range failed {
			if o.Test == "" {
				fmt.Fprintf(w, "  %s (did not build, or stopped before its tests ended)\n", o.Package)
				continue
			}
			fmt.Fprintf(w, "  %s %s\n", o.Package, o.Test)
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", passed, len(failed), len(skipped))
	return nil
}
