package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seedhq/httpretry/httpretrytest"
)

// TestQuickstart runs the demo against the flaky API in memory, on the
// fake clock of synctest, so the Retry-After second passes instantly.
func TestQuickstart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inMemory := &httpretrytest.HandlerTransport{Handler: newFlakyAPI()}
		var out bytes.Buffer
		start := time.Now()
		run(&out, "http://quickstart.test", inMemory)
		got := out.String()
		t.Log("\n" + got)

		for _, want := range []string{
			"attempt 3 GET /inventory -> 200 OK [success] done: success",
			`=> 200 OK: "42 widgets", after`,
			// Retry-After: 1, lengthened by up to 10 %: 1s to 1.1s.
			"attempt 1 GET /quota -> 429 Too Many Requests [transient] retry in 1",
			"(retry-after)",
			`=> 200 OK: "quota ok", after`,
			"attempt 2 POST /charges key=",
			"charged once (1 charge(s) recorded)",
			"attempt 1 GET /missing -> 404 Not Found [fatal] done: not retryable",
			`=> 404 Not Found: "no such endpoint", after`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.Count(got, "attempt ") != 8 {
			t.Errorf("want 8 attempts in all, got %d", strings.Count(got, "attempt "))
		}
		if time.Since(start) < time.Second {
			t.Errorf("Retry-After: 1 was not obeyed: whole run took %v", time.Since(start))
		}
	})
}
