package quantile

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The facts docs/hedging.md rests its choice on, on one seed; the tables
// come from cmd/estimators over several.

// named returns the item whose name starts with prefix.
func named[T any](t *testing.T, items []T, name func(T) string, prefix string) T {
	for _, it := range items {
		if strings.HasPrefix(name(it), prefix) {
			return it
		}
	}
	t.Fatalf("nothing named %q", prefix)
	var zero T
	return zero
}

func candidate(t *testing.T, prefix string) Candidate {
	return named(t, Candidates(), func(c Candidate) string { return c.Name }, prefix)
}

func policy(t *testing.T, prefix string) Policy {
	return named(t, Policies(), func(p Policy) string { return p.Name }, prefix)
}

func TestOpenStreams(t *testing.T) {
	t.Parallel()
	sc := Scenarios()
	chosen := candidate(t, "log histogram, 2 windows")
	r := RunOpen(chosen.New(0.95), sc[0], sc[0].Stream(1), 0.95)
	assert.Less(t, r.ErrMedian, 0.05, "T1: p95 within the buckets' resolution")
	r = RunOpen(chosen.New(0.95), sc[2], sc[2].Stream(1), 0.95)
	assert.True(t, r.Follow >= 0 && r.Follow <= 1000, "T3: follows within 1,000 requests (%d)", r.Follow)
	r = RunOpen(chosen.New(0.95), sc[1], sc[1].Stream(1), 0.95)
	assert.True(t, r.Relearn >= 0 && r.RelearnTime < 2*time.Second, "T2: relearns within 2 s (%v)", r.RelearnTime)

	p2 := candidate(t, "P²")
	r = RunOpen(p2.New(0.95), sc[2], sc[2].Stream(1), 0.95)
	assert.True(t, r.Follow < 0 || r.Follow > 1000, "P² never forgets, so it follows slowly (%d)", r.Follow)
}

func TestClosedLoop(t *testing.T) {
	t.Parallel()
	sc := Scenarios()
	chosen := policy(t, "histogram max(p95, 2×p50)")
	r := RunClosed(chosen, sc[0], 1)
	assert.LessOrEqual(t, r.Extra, 0.02, "T1: the stragglers and little else are hedged")
	assert.LessOrEqual(t, r.P999, 200*time.Millisecond/15, "T1: p99.9 ≤ 1/15 of unhedged")

	open := StreamQuantile(sc[3].Stream(1), 0.95)
	winners := RunClosed(policy(t, "histogram p95, winners"), sc[3], 1)
	assert.Less(t, winners.Delay, open/5, "recording only the answers that won removes the tail: the delay collapses")
	censored := RunClosed(policy(t, "histogram p95, first attempts censored"), sc[3], 1)
	assert.Greater(t, censored.Delay, open/2, "censored first attempts keep it (%v, unhedged p95 %v)", censored.Delay, open)
	assert.Less(t, censored.Extra, 0.07)

	fs := RunClosed(policy(t, "failsafe-go quantile 0.99"), sc[0], 1)
	require.Greater(t, fs.Delay, 100*time.Millisecond, "failsafe-go's moving p99 settles among the stragglers")
}
