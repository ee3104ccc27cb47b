package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func metastable(b func() Budget) MetastableConfig {
	c := DefaultMetastable(240 * time.Second)
	c.NewBudget = b
	return c
}

// TestMetastableNoBudget reproduces Bronson's example: after the blip every
// query times out and is retried, the client sends about 560 per second
// and the system never recovers.
func TestMetastableNoBudget(t *testing.T) {
	t.Parallel()
	r := RunMetastable(metastable(nil), 1)
	assert.Zero(t, r.Recovered)
	assert.InEpsilon(t, 560, MeanRate(r.Sent, 40*time.Second, 200*time.Second), 0.05)
}

// TestMetastableRatioBudget: a 10 % ratio budget still sends about 308 per
// second against a capacity of 300, so it does not recover either.
func TestMetastableRatioBudget(t *testing.T) {
	t.Parallel()
	r := RunMetastable(metastable(RatioBudget), 1)
	assert.Zero(t, r.Recovered)
	assert.Greater(t, MeanRate(r.Sent, 40*time.Second, 200*time.Second), 300.0)
}

// TestMetastableDefaultBudget checks scenario C2's target: with the default
// token bucket retries stop, the backlog drains at μ − λ and goodput comes
// back within 1.5× backlog/(μ − λ) of the blip's end.
func TestMetastableDefaultBudget(t *testing.T) {
	t.Parallel()
	c := metastable(DefaultBudget)
	r := RunMetastable(c, 1)
	if assert.NotZero(t, r.Recovered, "never recovered") {
		limit := c.RecoveryLimit(r.Backlog)
		took := r.Recovered - c.BlipEnd
		assert.LessOrEqual(t, took, limit*3/2, "recovered %v after the blip; limit %v (backlog %.0f)", took, limit, r.Backlog)
	}
	assert.InEpsilon(t, 280, MeanRate(r.Sent, 40*time.Second, 120*time.Second), 0.05, "no retries while the bucket is empty")
}
