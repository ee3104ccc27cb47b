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
