//go:build !race

package sim

// raceEnabled reports a -race build, whose tests run 5–10× slower: they
// then use fewer repetitions, never weaker assertions.
const raceEnabled = false
