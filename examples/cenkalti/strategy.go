package main

import (
	"errors"
	"math/rand/v2"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
)

// FromBackOff adapts a cenkalti/backoff/v5 BackOff to httpretry's
// backoff.Strategy.
//
// A BackOff is stateful (NextBackOff advances it) and not safe for
// concurrent use, while a Strategy is shared by every RoundTrip in flight
// and must be stateless. So the adapter holds a constructor, not a BackOff:
// for retry n it builds a fresh BackOff and asks it n times, and the n-th
// answer is the wait. That costs n calls per retry, with n below
// MaxAttempts.
//
// A BackOff draws its jitter from math/rand/v2's global generator, so the
// *rand.Rand httpretry passes is not used, and the BackOff's own cap rules
// apply: ExponentialBackOff caps the interval before randomising it, so its
// waits reach (1 + RandomizationFactor) × MaxInterval. A Strategy cannot
// stop retries: when NextBackOff says Stop, the adapter repeats the last
// wait it had (0 if none), and MaxAttempts bounds the retries.
type FromBackOff struct {
	New func() cenkalti.BackOff // called once per retry; must not be nil
}

// Delay implements backoff.Strategy. It is the only line that depends on
// that interface's signature: if the signature changes, change this line.
func (s FromBackOff) Delay(n int, _ time.Duration, _ *rand.Rand) time.Duration { return s.delay(n) }

// delay returns the wait before retry n, n = 1 for the first retry.
func (s FromBackOff) delay(n int) time.Duration {
	b := s.New()
	b.Reset()
	var last time.Duration
	for range n {
		d := b.NextBackOff()
		if d == cenkalti.Stop {
			break
		}
		last = d
	}
	return max(last, 0)
}

// Validate reports a missing constructor; httpretry calls it once, when the
// policy is compiled, and fails every request with ErrInvalidPolicy if it
// returns an error.
func (s FromBackOff) Validate() error {
	if s.New == nil {
		return errors.New("FromBackOff: New is nil")
	}
	return nil
}
