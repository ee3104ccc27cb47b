package hedgeload

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReport: results written as cmd/hedgeload writes them are read back,
// tabulated with their medians and ranges, and judged against the goals.
func TestReport(t *testing.T) {
	ms := time.Millisecond
	t1 := func(v string, p999 time.Duration, attempts int64) Result {
		return Result{Variant: v, Scenario: "T1", Scale: 1, Total: Stats{Requests: 1000, Attempts: attempts, P999: p999,
			Quantiles: make([]time.Duration, len(CDFLevels))}}
	}
	runs := []Result{
		t1("none", 201*ms, 1000), t1("none", 203*ms, 1000),
		t1("httpretry-adaptive", 6*ms, 1010), t1("httpretry-adaptive", 8*ms, 1012),
		t1("failsafe-quantile", 7*ms, 1020), t1("failsafe-quantile", 9*ms, 1020),
	}
	runs[2].Total.Quantiles[0], runs[3].Total.Quantiles[0] = 2*ms, 4*ms
	path := filepath.Join(t.TempDir(), "hedgeload.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	for _, r := range runs {
		b, _ := json.Marshal(r)
		f.Write(append(b, '\n'))
	}
	require.NoError(t, f.Close())

	rs, err := ReadResults(path)
	require.NoError(t, err)
	require.Len(t, rs["T1"]["httpretry-adaptive"], 2)

	var b strings.Builder
	Table(&b, "T1", rs["T1"])
	assert.Contains(t, b.String(), "| httpretry-adaptive | 0.00 [0.00–0.00] ms | 0.00 [0.00–0.00] ms | 7.00 [6.00–8.00] ms | 1.10 [1.00–1.20] % |")
	assert.NotContains(t, b.String(), "failsafe-fixed", "variants without runs are left out")

	goals := Goals(rs)
	require.Len(t, goals, 4, "T1's only")
	for _, g := range goals {
		assert.True(t, g.Met, "%+v", g)
	}
	assert.Equal(t, "7.0 ms vs 202 ms unhedged (1/29)", goals[0].Measured)

	q := MeanQuantiles(rs["T1"]["httpretry-adaptive"])
	assert.Equal(t, 3*ms, q[0], "quantile by quantile")
	assert.Nil(t, MeanQuantiles(nil))
}

// TestParams: the rounds, scale and scenarios are read back from the runs,
// and a file whose runs disagree names none.
func TestParams(t *testing.T) {
	run := func(sc, v string, scale float64) Result { return Result{Variant: v, Scenario: sc, Scale: scale} }
	rs := Results{
		"T3": {"none": {run("T3", "none", 1), run("T3", "none", 1)}},
		"T1": {"none": {run("T1", "none", 1), run("T1", "none", 1)}, "httpretry-adaptive": {run("T1", "httpretry-adaptive", 1), run("T1", "httpretry-adaptive", 1)}},
	}
	rounds, scale, scenarios, ok := rs.Params()
	require.True(t, ok)
	assert.Equal(t, 2, rounds)
	assert.Equal(t, 1.0, scale)
	assert.Equal(t, []string{"T1", "T3"}, scenarios, "in the order of Scenarios")

	rs["T3"]["none"] = append(rs["T3"]["none"], run("T3", "none", 1))
	_, _, _, ok = rs.Params()
	assert.False(t, ok, "3 rounds of one, 2 of the others")

	rs["T3"]["none"] = []Result{run("T3", "none", 0.1), run("T3", "none", 0.1)}
	_, _, _, ok = rs.Params()
	assert.False(t, ok, "two scales")

	_, _, _, ok = Results{"smoke": {"none": {run("smoke", "none", 1)}}}.Params()
	assert.False(t, ok, "a scenario Scenarios does not know")
	_, _, _, ok = Results{}.Params()
	assert.False(t, ok, "no runs")
}
