package sim

import (
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/bench/hedgeload"
)

// The hedging scenarios of issue 14 on a virtual clock: the clients of
// package hedgeload (the real httpretry Transport and failsafe-go hedge
// policies) over a simulated Base inside a synctest bubble, so the figures
// do not depend on the machine and CI can check them. cmd/hedgeload gives
// the same comparison on real sockets.
//
// The goals (issue 14), checked for httpretry-adaptive, the default policy
// with adaptive hedging on and nothing tuned:
//
//   - T1: p99.9 ≤ 1/15 of unhedged, extra requests ≤ 2 %, and no worse
//     than failsafe-go's quantile policy (see TestHedgingT1 for what "no
//     worse" can mean when that policy trades one figure for the other);
//   - T2: extra requests during the brownout ≤ 5 %, the delay back to
//     normal within 2 s after it, and the p99.9 of the 10 s after it within
//     2 × the p99.9 before it;
//   - T3: the delay follows the shift within 1,000 requests, and extra
//     requests over the run ≤ 3 %.

// hedgeScale is the size of the runs: full (15,000 requests, 10 s phases)
// normally, a tenth under -race or -short.
func hedgeScale() float64 {
	if raceEnabled || testing.Short() {
		return 0.1
	}
	return 1
}

// failsafeQuantile99 is failsafe-go's quantile policy at the p99, which the
// issue measured ratcheting into the stragglers; it is compared here only.
var failsafeQuantile99 = hedgeload.Variant{Name: "failsafe-quantile-0.99", New: func(base http.RoundTripper) http.RoundTripper {
	return failsafehttp.NewRoundTripper(base, hedgepolicy.NewWithDelayQuantile[*http.Response](0.99, 30, 20))
}}

// runVirtual runs every variant on sc, and the extra ones, and returns the
// results by variant name.
func runVirtual(t *testing.T, sc hedgeload.Scenario, extra ...hedgeload.Variant) map[string]hedgeload.Result {
	out := map[string]hedgeload.Result{}
	for _, v := range append(hedgeload.Variants(), extra...) {
		require.NotNil(t, v.New, v.Name)
		synctest.Test(t, func(t *testing.T) {
			r, err := hedgeload.RunVirtual(v, sc, 1)
			require.NoError(t, err)
			require.Zero(t, r.Total.Errors, v.Name)
			out[v.Name] = r
		})
		t.Logf("%s %s: p50 %v p99.9 %v extra %.2f %%", sc.Name, v.Name, out[v.Name].Total.P50, out[v.Name].Total.P999, 100*out[v.Name].Total.Extra())
	}
	return out
}

func TestHedgingT1(t *testing.T) {
	t.Parallel()
	rs := runVirtual(t, hedgeload.Scenarios(hedgeScale())[0], failsafeQuantile99)
	none := rs["none"].Total
	assert.GreaterOrEqual(t, none.P999, 200*time.Millisecond, "unhedged, the stragglers set the p99.9")
	assert.Zero(t, none.Extra())
	for _, name := range []string{"httpretry-fixed", "failsafe-fixed", "httpretry-adaptive"} {
		r := rs[name].Total
		assert.LessOrEqual(t, r.P999, none.P999/15, "%s: the p99.9 cut 15-fold", name)
		assert.LessOrEqual(t, r.Extra(), 0.02, "%s: by hedging about the 1 %% of stragglers", name)
	}

	// No worse than failsafe-go's quantile policy: fewer extra requests,
	// and a p99.9 that it beats only by paying for it with more than the
	// goal's 2 % extra requests. On the simulated spread its p95
	// estimate sits in the body of the distribution, so it hedges one
	// request in twenty for a p99.9 about 1.5 ms lower; at the p99 it
	// ratchets into the stragglers and cuts nothing.
	a, fq, fq99 := rs["httpretry-adaptive"].Total, rs["failsafe-quantile"].Total, rs["failsafe-quantile-0.99"].Total
	assert.Less(t, a.Extra(), fq.Extra(), "fewer extra requests than failsafe-go's quantile policy")
	if a.P999 > fq.P999 {
		assert.Greater(t, fq.Extra(), 0.02, "failsafe-go's lower p99.9 costs more extra requests than the goal allows")
		assert.Greater(t, fq.Extra(), 3*a.Extra(), "and more than three times ours")
	}
	if hedgeScale() == 1 { // it takes thousands of requests to ratchet
		assert.Greater(t, fq99.P999, 4*a.P999, "failsafe-go at the p99 does not get near our p99.9")
	}
}

// t2Scenario is T2 with its brownout at full length, 10 s (400 requests at
// concurrency 8), and the rest scaled: the budget's bound is a share of
// the brownout's requests plus a burst, which a shortened brownout would
// inflate. The 2 s just after it are full length too, to check that the
// delay is back within them.
func t2Scenario() hedgeload.Scenario {
	sc := hedgeload.Scenarios(hedgeScale())[1]
	sc.Phases = append([]hedgeload.Phase(nil), sc.Phases...)
	require := func(ok bool) {
		if !ok {
			panic("hedgeload's T2 phases changed")
		}
	}
	require(len(sc.Phases) == 4 && sc.Phases[1].Name == "brownout" && sc.Phases[2].Name == "just after")
	sc.Phases[1].Len = 10 * time.Second
	sc.Phases[2].Len = 2 * time.Second
	return sc
}

func TestHedgingT2(t *testing.T) {
	t.Parallel()
	sc := t2Scenario()
	rs := runVirtual(t, sc)
	assert.Zero(t, rs["none"].Phase("brownout").Extra())
	assert.Greater(t, rs["failsafe-fixed"].Phase("brownout").Extra(), 0.9,
		"a fixed delay below the brownout's latency, without a budget, hedges every request: double the load")
	assert.LessOrEqual(t, rs["httpretry-fixed"].Phase("brownout").Extra(), 0.05,
		"httpretry's fixed delay is held by the hedge budget")

	r := rs["httpretry-adaptive"]
	before, brownout := r.Phase("before"), r.Phase("brownout")
	assert.LessOrEqual(t, brownout.Extra(), 0.05, "extra requests during the brownout")
	assert.Greater(t, brownout.Extra(), 0.03, "the budget is spent on the brownout's first requests: a lower figure would mean a broken harness")
	for _, name := range []string{"just after", "after"} {
		assert.LessOrEqual(t, r.Phase(name).P999, 2*before.P999, "p99.9 %s the brownout within 2 × before", name)
	}
	start := sc.Phases[0].Len
	end := start + sc.Phases[1].Len
	normal, ok := r.DelayAt(start)
	require.True(t, ok)
	assert.InEpsilon(t, 4*time.Millisecond, normal, 0.25, "twice the 2 ms median before the brownout")
	peak, _ := r.DelayAt(end)
	assert.Greater(t, peak, 100*time.Millisecond, "the delay followed the brownout")
	back, _ := r.DelayAt(end + 2*time.Second)
	assert.InEpsilon(t, normal, back, 0.25, "back to normal within 2 s: %v, before %v", back, normal)
	for _, name := range []string{"httpretry-adaptive", "httpretry-fixed", "failsafe-quantile", "failsafe-fixed"} {
		r := rs[name]
		t.Logf("T2 %s: p99.9 before %v, brownout extra %.2f %%, p99.9 just after %v, after %v", name,
			r.Phase("before").P999, 100*r.Phase("brownout").Extra(), r.Phase("just after").P999, r.Phase("after").P999)
	}
	t.Logf("T2 httpretry-adaptive delay: %v before, %v at the brownout's end, %v 2 s after", normal, peak, back)
}

func TestHedgingT3(t *testing.T) {
	t.Parallel()
	sc := hedgeload.Scenarios(hedgeScale())[2]
	rs := runVirtual(t, sc)
	assert.Zero(t, rs["none"].Total.Extra())
	assert.Greater(t, rs["failsafe-fixed"].Total.Extra(), 0.3,
		"after the shift to 20 ms, a 5 ms delay without a budget hedges every request")
	assert.LessOrEqual(t, rs["httpretry-fixed"].Total.Extra(), 0.05, "httpretry's is held by the hedge budget")

	r := rs["httpretry-adaptive"]
	assert.LessOrEqual(t, r.Total.Extra(), 0.03, "extra requests over the run")
	shift := int64(sc.Requests / 2)
	settled, ok := r.Settled(40*time.Millisecond, 0.25)
	require.True(t, ok, "the delay settles at twice the new 20 ms median")
	assert.LessOrEqual(t, settled, shift+1000, "within 1,000 requests of the shift")
	assert.Greater(t, settled, shift)
	t.Logf("T3 httpretry-adaptive: the delay settles at 40 ms ±25 %% %d requests after the shift", settled-shift)
}

// TestHedgingLongTail is T1 on a host whose ordinary latency has a long
// tail (log-normal, σ 0.5: a p95 2.3 times the median, as many real
// upstreams have), where hedges at the p95 ask for as many hedges as the
// budget earns. The stragglers still get theirs, late: the budget keeps
// its last token for attempts still unanswered at twice the delay.
func TestHedgingLongTail(t *testing.T) {
	t.Parallel()
	sc := hedgeload.Scenario{Name: "T1-long-tail", Requests: hedgeload.Scenarios(hedgeScale())[0].Requests,
		Latency: func(rng *rand.Rand, _ int64, _ int, _ string) time.Duration {
			if rng.Float64() < 0.01 {
				return 200 * time.Millisecond
			}
			return time.Duration(float64(2*time.Millisecond) * math.Exp(0.5*rng.NormFloat64()))
		}}
	rs := runVirtual(t, sc)
	none, a := rs["none"].Total, rs["httpretry-adaptive"].Total
	assert.LessOrEqual(t, a.P999, none.P999/10, "the stragglers are hedged")
	assert.LessOrEqual(t, a.Extra(), 0.05, "within the hedge budget")
}
