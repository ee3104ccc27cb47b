package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

func ExampleConstant() {
	s := backoff.Constant(500 * time.Millisecond)
	for n := 1; n <= 3; n++ {
		fmt.Printf("retry %d: %v\n", n, s.Delay(n, 0, nil))
	}
	// Output:
	// retry 1: 500ms
	// retry 2: 500ms
	// retry 3: 500ms
}

func ExampleLinear() {
	s := backoff.Linear{Base: time.Second, Step: 500 * time.Millisecond, Cap: 2 * time.Second}
	for n := 1; n <= 4; n++ {
		fmt.Printf("retry %d: %v\n", n, s.Delay(n, 0, nil))
	}
	// Output:
	// retry 1: 1s
	// retry 2: 1.5s
	// retry 3: 2s
	// retry 4: 2s
}

// Brooker's 2015 simulator uses base 5 ms and cap 2 s, and its first retry
// already waits 2·base; with n = 1 as the first retry here, Base is 10 ms.
func ExampleExponential() {
	s := backoff.Exponential{Base: 10 * time.Millisecond, Factor: 2, Cap: 2 * time.Second}
	for n := 1; n <= 10; n++ {
		fmt.Printf("retry %d: %v\n", n, s.Delay(n, 0, nil))
	}
	// Output:
	// retry 1: 10ms
	// retry 2: 20ms
	// retry 3: 40ms
	// retry 4: 80ms
	// retry 5: 160ms
	// retry 6: 320ms
	// retry 7: 640ms
	// retry 8: 1.28s
	// retry 9: 2s
	// retry 10: 2s
}

// With full jitter each delay is drawn below the un-jittered one. A seeded
// generator makes the schedule reproducible, for tests; production code
// passes nil.
func ExampleExponential_fullJitter() {
	s := backoff.Exponential{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: backoff.FullJitter}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 6; n++ {
		fmt.Printf("retry %d: %v\n", n, s.Delay(n, 0, r).Round(time.Millisecond))
	}
	// Output:
	// retry 1: 68ms
	// retry 2: 92ms
	// retry 3: 203ms
	// retry 4: 344ms
	// retry 5: 798ms
	// retry 6: 388ms
}

// Decorrelated jitter needs the previous delay fed back in.
func ExampleDecorrelated() {
	s := backoff.Decorrelated{Base: 100 * time.Millisecond, Cap: 2 * time.Second}
	r := rand.New(rand.NewPCG(1, 2))
	var prev time.Duration
	for n := 1; n <= 8; n++ {
		prev = s.Delay(n, prev, r)
		fmt.Printf("retry %d: %v\n", n, prev.Round(time.Millisecond))
	}
	// Output:
	// retry 1: 235ms
	// retry 2: 380ms
	// retry 3: 628ms
	// retry 4: 867ms
	// retry 5: 2s
	// retry 6: 2s
	// retry 7: 2s
	// retry 8: 2s
}

// The ceilings of the default schedule and the longest the waits can add up
// to; each delay is drawn uniformly below its ceiling.
func ExampleDefault() {
	ceiling := backoff.Default()
	ceiling.Jitter = backoff.NoJitter
	var total time.Duration
	for n := 1; n <= 8; n++ {
		c := ceiling.Delay(n, 0, nil)
		total += c
		d := backoff.Default().Delay(n, 0, nil)
		fmt.Printf("retry %d: ceiling %v, worst case so far %v, drawn below ceiling: %v\n", n, c, total, d >= 0 && d <= c)
	}
	// Output:
	// retry 1: ceiling 100ms, worst case so far 100ms, drawn below ceiling: true
	// retry 2: ceiling 200ms, worst case so far 300ms, drawn below ceiling: true
	// retry 3: ceiling 400ms, worst case so far 700ms, drawn below ceiling: true
	// retry 4: ceiling 800ms, worst case so far 1.5s, drawn below ceiling: true
	// retry 5: ceiling 1.6s, worst case so far 3.1s, drawn below ceiling: true
	// retry 6: ceiling 3s, worst case so far 6.1s, drawn below ceiling: true
	// retry 7: ceiling 3s, worst case so far 9.1s, drawn below ceiling: true
	// retry 8: ceiling 3s, worst case so far 12.1s, drawn below ceiling: true
}
