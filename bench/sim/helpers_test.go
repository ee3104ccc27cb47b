package sim

import "testing"

// reps returns n, or a smaller count under -race or -short so the whole
// bench module's tests stay within CI's budget on two cores. Tolerances are
// computed from the standard error, so fewer runs widen them honestly.
func reps(t *testing.T, n, reduced int) int {
	t.Helper()
	if raceEnabled || testing.Short() {
		return reduced
	}
	return n
}
