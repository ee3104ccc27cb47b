package main

import (
	"bytes"
	"strings"
	"testing"
)

// A go test -json stream: a pass with a log line, a skip with its reason
// (one a subtest's), a failure, and a package that did not build.
const stream = `{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"-test.shuffle 1\n"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: hello\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestSub/x","Output":"=== RUN   TestSub/x\n"}
{"Action":"output","Package":"p","Test":"TestSub/x","Output":"    a_test.go:5: nginx not installed\n"}
{"Action":"output","Package":"p","Test":"TestSub/x","Output":"--- SKIP: TestSub/x (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestSub/x"}
{"Action":"pass","Package":"p","Test":"TestSub"}
{"Action":"output","Package":"p","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"p","Test":"TestFail","Output":"    a_test.go:6: boom\n"}
{"Action":"output","Package":"p","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestFail"}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.02s\n"}
{"Action":"fail","Package":"p"}
# q [q.test]
./b.go:2:14: syntax error
{"Action":"output","Package":"q","Output":"FAIL\tq [build failed]\n"}
{"Action":"fail","Package":"q"}
{"Action":"output","Package":"r","Output":"PASS\n"}
{"Action":"output","Package":"r","Output":"ok  \tr\t0.01s\n"}
{"Action":"pass","Package":"r"}
`

func TestRenderAndSummarize(t *testing.T) {
	var out, rec, sum bytes.Buffer
	if err := render(&out, &rec, strings.NewReader(stream), false); err != nil {
		t.Fatal(err)
	}
	wantOut := "-test.shuffle 1\n" +
		"    a_test.go:6: boom\n--- FAIL: TestFail (0.00s)\n" +
		"FAIL\nFAIL\tp\t0.02s\n" +
		"# q [q.test]\n./b.go:2:14: syntax error\nFAIL\tq [build failed]\n" +
		"ok  \tr\t0.01s\n"
	if out.String() != wantOut {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), wantOut)
	}
	if err := summarize(&sum, &rec); err != nil {
		t.Fatal(err)
	}
	wantSum := "\nSkipped (1):\n  p TestSub/x: nginx not installed\n" +
		"Failed (2):\n  p TestFail\n  q (did not build, or stopped before its tests ended)\n" +
		"2 passed, 2 failed, 1 skipped\n"
	if sum.String() != wantSum {
		t.Errorf("summary:\n%s\nwant:\n%s", sum.String(), wantSum)
	}
}

func TestRenderVerbose(t *testing.T) {
	var out, rec bytes.Buffer
	if err := render(&out, &rec, strings.NewReader(stream), true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"=== RUN   TestA\n", "    a_test.go:3: hello\n", "--- SKIP: TestSub/x", "PASS\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verbose output lacks %q", want)
		}
	}
}

func TestSkipReason(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"=== RUN   T\n", "    x_test.go:9: no nginx: install it\n", "--- SKIP: T (0.00s)\n"}, "no nginx: install it"},
		{[]string{"=== RUN   T\n", "--- SKIP: T (0.00s)\n"}, "no reason given"},
		{[]string{"    x_test.go:9: first\n", "    second line\n"}, "first; second line"},
	} {
		if got := skipReason(c.lines); got != c.want {
			t.Errorf("skipReason(%q) = %q, want %q", c.lines, got, c.want)
		}
	}
}
