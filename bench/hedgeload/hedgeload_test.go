package hedgeload

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVariantsRun is a smoke test of the harness on real sockets: every
// filled variant completes a short run in which a fifth of the attempts
// are slow, and the fixed-delay ones hedge them. The figures
// themselves come from cmd/hedgeload.
func TestVariantsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets and sleeps")
	}
	sc := Scenario{Name: "smoke", Requests: 120, Latency: func(rng *rand.Rand, _ int64, _ int, _ string) time.Duration {
		if rng.Float64() < 0.2 {
			return 100 * time.Millisecond
		}
		return time.Millisecond
	}}
	for _, v := range Variants() {
		t.Run(v.Name, func(t *testing.T) {
			r, err := Run(v, sc)
			if v.New == nil {
				require.Error(t, err, "an empty slot says so")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 120, r.Total.Requests)
			assert.Zero(t, r.Total.Errors)
			assert.GreaterOrEqual(t, r.Dials, int64(1))
			assert.LessOrEqual(t, r.Dials, r.Total.Attempts+Concurrency, "at most one dial per attempt")
			switch v.Name {
			case "none":
				assert.Zero(t, r.Total.Extra(), "no hedging, no retries")
			case "httpretry-fixed", "failsafe-fixed":
				assert.Greater(t, r.Total.Extra(), 0.0, "slow attempts are hedged after 5 ms")
			default: // a learned delay may sit at the slow attempts' latency
				assert.GreaterOrEqual(t, r.Total.Extra(), 0.0)
			}
			if v.Name == "httpretry-adaptive" {
				assert.Len(t, r.Delays, 120/DelayEvery, "its delay is traced")
			} else {
				assert.Empty(t, r.Delays, "only an adaptive Transport reports a delay")
			}
		})
	}
}

func TestScenarioPhases(t *testing.T) {
	sc := Scenarios(0.1)
	require.Len(t, sc, 3)
	assert.Equal(t, 1500, sc[0].Requests)
	assert.Equal(t, 200*time.Millisecond, sc[1].Latency(nil, 0, 0, "brownout"))
	assert.Equal(t, 2*time.Millisecond, sc[1].Latency(nil, 0, 0, "after"))
	assert.Equal(t, 2*time.Millisecond, sc[2].Latency(nil, 750, 1500, ""))
	assert.Equal(t, 20*time.Millisecond, sc[2].Latency(nil, 751, 1500, ""))
}

func TestDelayTrace(t *testing.T) {
	ms := time.Millisecond
	r := Result{Delays: []DelayPoint{
		{50, 10 * ms, 4 * ms}, {100, 20 * ms, 4 * ms}, {150, 30 * ms, 30 * ms},
		{200, 40 * ms, 41 * ms}, {250, 50 * ms, 60 * ms}, {300, 60 * ms, 39 * ms}, {350, 70 * ms, 40 * ms},
	}}
	_, ok := r.DelayAt(5 * ms)
	assert.False(t, ok, "nothing traced yet")
	d, ok := r.DelayAt(25 * ms)
	assert.True(t, ok)
	assert.Equal(t, 4*ms, d)
	d, _ = r.DelayAt(time.Hour)
	assert.Equal(t, 40*ms, d)

	at, ok := r.Settled(40*ms, 0.25)
	assert.True(t, ok)
	assert.Equal(t, int64(300), at, "within ±25 % for good from request 300: 60 ms at 250 was out")
	_, ok = r.Settled(4*ms, 0.25)
	assert.False(t, ok, "it left 4 ms")
}
