package e2e

import (
	"bytes"
	"os"
	"runtime"
	"testing"
	"time"
)

// usage is a count of the process's goroutines and open file descriptors.
//
// The goroutines of the fault injector are counted apart: toxiproxy v2.5.0
// can leave one of its own stuck for good when a connection dies while it
// moves data (a toxic stub blocked sending to a link whose writer has
// exited). That is toxiproxy's leak, not the code under test's, so the
// checks here and goleak in TestMain leave those out; the report counts
// them.
type usage struct{ goroutines, injector, fds int }

// injectorFrame marks a goroutine of toxiproxy's in a stack dump.
var injectorFrame = []byte("github.com/Shopify/toxiproxy/")

func currentUsage(t testing.TB) usage {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting open files: %v", err)
	}
	ours, injector := countGoroutines()
	return usage{goroutines: ours, injector: injector, fds: len(entries)}
}

// countGoroutines counts the goroutines, toxiproxy's apart.
func countGoroutines() (ours, injector int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, injectorFrame) {
			injector++
		} else {
			ours++
		}
	}
	return ours, injector
}

// settle waits until the process is back to at most base, for at most
// within, and returns what it ended at. Connections close and goroutines
// exit asynchronously after a server or transport is closed, so a check
// made at once would see stragglers that are already on their way out.
func settle(t testing.TB, base usage, within time.Duration) usage {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		u := currentUsage(t)
		if u.goroutines <= base.goroutines && u.fds <= base.fds || time.Now().After(deadline) {
			return u
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireSettled fails t unless goroutines and file descriptors return to
// base within a few seconds.
func requireSettled(t testing.TB, base usage) usage {
	t.Helper()
	u := settle(t, base, 5*time.Second)
	if u.goroutines > base.goroutines || u.fds > base.fds {
		buf := make([]byte, 1<<20)
		t.Fatalf("not back to baseline: %d goroutines (baseline %d), %d open files (baseline %d)\n%s",
			u.goroutines, base.goroutines, u.fds, base.fds, buf[:runtime.Stack(buf, true)])
	}
	return u
}
