package httpretry

// SetHostLimit bounds the hosts t keeps state for at n instead of 10,000,
// before t's first use, so that the invariants harness can fill the table
// with a few hosts. It exists only in this package's tests.
func SetHostLimit(t *Transport, n int) { t.states.Limit = n }
