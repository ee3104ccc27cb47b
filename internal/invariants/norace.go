//go:build !race

package invariants

// Without the race detector TestInvariants plays 100,000 scenarios by
// default (see race.go).
const (
	defaultScenarios = 100_000
	raceEnabled      = false
)
