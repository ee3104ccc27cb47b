// Package rounds orders side-by-side measurements. A comparison runs in
// rounds; in each round every variant runs once, in a process of its own,
// one after the other, and the order turns by one variant every round, so
// that no variant always runs first on a cold machine, right after
// another's garbage, or in the same slot of a noisy minute. Each variant's
// samples then interleave with the others' instead of sitting in one
// block, as `go test -count N` puts them, and a ratio taken within a round
// compares measurements made minutes apart at most.
package rounds

import (
	"slices"

	"github.com/seedhq/httpretry/bench/sim"
)

// Order returns the variants in the order of round r (from 0): turned left
// by r.
func Order[T any](variants []T, r int) []T {
	k := r % len(variants)
	return append(slices.Clone(variants[k:]), variants[:k]...)
}

// Each calls f for every round and, within it, for every variant in that
// round's order, and stops at the first error.
func Each[T any](n int, variants []T, f func(round int, v T) error) error {
	for r := range n {
		for _, v := range Order(variants, r) {
			if err := f(r, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// Spread is the median of a measurement over the rounds and its range.
type Spread struct{ Median, Min, Max float64 }

// Of returns the spread of xs; the zero Spread for none.
func Of(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	return Spread{sim.Median(xs), slices.Min(xs), slices.Max(xs)}
}
