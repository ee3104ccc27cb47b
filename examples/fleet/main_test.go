package main

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMain makes the test binary a worker when run() starts it as one.
func TestMain(m *testing.M) {
	if os.Getenv("FLEET_EXAMPLE_WORKER") != "" {
		worker()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Two processes wanting 160/s together against a quota of 100/s: with
// the fleet, no call fails and almost nothing is answered 429.
func TestTwoProcessesShareOneQuota(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; CI=true: failing, not skipping")
		}
		t.Skip("redis-server is not installed")
	}
	var out bytes.Buffer
	sums, err := run(false, 2*time.Second, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	sent, limited := 0, 0
	for _, s := range sums {
		if s.Failed > 0 {
			t.Errorf("%s: %d calls failed", s.Name, s.Failed)
		}
		sent += s.OK + s.Limited
		limited += s.Limited
		if s.OK == 0 {
			t.Errorf("%s got no turn of the quota", s.Name)
		}
	}
	if limited*100 > sent*3 {
		t.Errorf("%d of %d requests answered 429 with the fleet, want at most 3 %%", limited, sent)
	}
}
