//go:build !race

package httpretry_test

// Without the race detector TestInvariants plays 100,000 scenarios by
// default (see invariants_race_test.go).
const (
	defaultScenarios = 100_000
	raceEnabled      = false
)
