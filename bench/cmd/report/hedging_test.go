package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seedhq/httpretry/bench/hedgeload"
)

// TestHedgingSectionNamesItsRun: section 6 names the command, with the
// rounds and scale read from the results, and sizes its scenarios by that
// scale; results that mix runs say so instead of naming a command.
func TestHedgingSectionNamesItsRun(t *testing.T) {
	results := func(rounds int, scale float64) hedgeload.Results {
		rs := hedgeload.Results{}
		for _, sc := range []string{"T1", "T2", "T3"} {
			rs[sc] = map[string][]hedgeload.Result{}
			for _, v := range hedgeload.Variants() {
				for range rounds {
					rs[sc][v.Name] = append(rs[sc][v.Name], hedgeload.Result{Variant: v.Name, Scenario: sc, Scale: scale})
				}
			}
		}
		return rs
	}
	section := func(rs hedgeload.Results) string {
		var b strings.Builder
		(&report{hedging: rs}).hedgingSection(&b)
		return b.String()
	}

	s := section(results(2, 0.1))
	assert.Contains(t, s, "`cd bench && go run ./cmd/hedgeload -rounds 2 -scale 0.1 -scenarios T1,T2,T3` (30 runs;")
	assert.Contains(t, s, "**T1 stragglers**: 1,500 requests;")
	assert.Contains(t, s, "2 ms for 1 s; every request 200 ms for 1 s;")
	assert.Contains(t, s, "the 0.2 s just after, the 0.8 s after")

	s = section(results(5, 1))
	assert.Contains(t, s, "-rounds 5 -scale 1 -scenarios T1,T2,T3` (75 runs;")
	assert.Contains(t, s, "15,000 requests")
	assert.Contains(t, s, "2 ms for 10 s; every request 200 ms for 10 s;")

	mixed := results(5, 1)
	mixed["T2"]["none"] = mixed["T2"]["none"][:4]
	s = section(mixed)
	assert.Contains(t, s, "mixes runs of different rounds or scales")
	assert.NotContains(t, s, "-rounds 5")
}
