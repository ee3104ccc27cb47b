package sim

import (
	"math"
	"testing"
	"time"

	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
)

// stormConfig is scenario C with fewer clients: budgets are per client, so
// amplification and availability do not depend on how many there are.
func stormConfig(t *testing.T, f float64, d time.Duration, b func() Budget) StormConfig {
	c := DefaultStorm(f, d)
	c.Clients = reps(t, 20, 6)
	c.NewBudget = b
	return c
}

// TestStormDefaultBudget checks scenario C's target: under total failure
// for 300 s the default budget keeps attempts per request at most 1.05
// (analytically 1 + 100 retries / 3000 requests per client = 1.033).
func TestStormDefaultBudget(t *testing.T) {
	t.Parallel()
	r := RunStorm(stormConfig(t, 1, 300*time.Second, DefaultBudget), 1)
	assert.LessOrEqual(t, r.AttemptsPerRequest(), 1.05)
	assert.InDelta(t, 1+100/3000.0, r.AttemptsPerRequest(), 0.005)

	none := RunStorm(stormConfig(t, 1, 300*time.Second, nil), 1)
	assert.Equal(t, 4.0, none.AttemptsPerRequest(), "no budget: every request makes all 4 attempts")
}

// TestStormBudgetInvisibleBelowKnee: at up to 5 % failures the default
// budget's availability is within 0.1 percentage points of no budget.
func TestStormBudgetInvisibleBelowKnee(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{0, 0.01, 0.05} {
		none := RunStorm(stormConfig(t, f, 300*time.Second, nil), 2)
		def := RunStorm(stormConfig(t, f, 300*time.Second, DefaultBudget), 2)
		assert.InDelta(t, none.Availability(), def.Availability(), 0.001, "f=%v", f)
		assert.InDelta(t, none.AttemptsPerRequest(), def.AttemptsPerRequest(), 0.001, "f=%v", f)
	}
}

// TestStormRatioBudget: a 10 % ratio budget holds amplification at about
// 1 + 0.1 under total failure: at most one retry per ten requests.
func TestStormRatioBudget(t *testing.T) {
	t.Parallel()
	r := RunStorm(stormConfig(t, 1, 60*time.Second, RatioBudget), 3)
	assert.InDelta(t, 1.1, r.AttemptsPerRequest(), 0.015)
}

// TestStormNoBudgetMatchesAnalysis: without a budget, A = 1+f+f²+f³ and
// availability 1 − f⁴.
func TestStormNoBudgetMatchesAnalysis(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{0.1, 0.5} {
		r := RunStorm(stormConfig(t, f, 120*time.Second, nil), 4)
		assert.InEpsilon(t, 1+f+f*f+f*f*f, r.AttemptsPerRequest(), 0.02, "f=%v", f)
		assert.InDelta(t, 1-math.Pow(f, 4), r.Availability(), 0.01, "f=%v", f)
	}
}

// TestStormJitterDoesNotMatter: in an open loop the backoff changes when
// retries happen, not how many (Brooker, "What is Backoff For?", 2022: with
// an unbounded number of clients "per-request retry backoff has nearly no
// effect on traffic amplification"); a budget whose amplification
// moved with the jitter mode would be charged at the wrong moment.
func TestStormJitterDoesNotMatter(t *testing.T) {
	t.Parallel()
	var as []float64
	for _, j := range []backoff.Jitter{backoff.NoJitter, backoff.FullJitter, backoff.EqualJitter} {
		c := stormConfig(t, 1, 120*time.Second, DefaultBudget)
		c.Strategy = backoff.Exponential{Base: 100 * time.Millisecond, Cap: 10 * time.Second, Jitter: j}
		as = append(as, RunStorm(c, 5).AttemptsPerRequest())
	}
	assert.InEpsilon(t, as[0], as[1], 0.01)
	assert.InEpsilon(t, as[0], as[2], 0.01)
}
