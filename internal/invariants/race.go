//go:build race

package invariants

// Under the race detector, which makes a scenario about ten times slower,
// TestInvariants plays 20,000 scenarios by default: CI plays 100,000
// without it in a step of its own (see .ci/run).
const (
	defaultScenarios = 20_000
	raceEnabled      = true
)
