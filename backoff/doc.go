// Package backoff computes how long to wait between retries.
//
// The engine is stateless: a [Strategy] is a function of the retry number,
// the previous delay and a source of randomness, so one value is shared by
// any number of goroutines without locks, and the caller's loop carries the
// little state there is, as grpc-go's backoff.Strategy is a function of the
// retry count. httpretry's Transport is its user; any retry loop can use it.
// [Wait] and [Fits] are the two timing primitives such a loop needs: a wait
// that ends with the context, and the check that a wait would end before the
// context's deadline.
//
// # Shapes and jitter
//
// [Constant], [Linear] and [Exponential] give the un-jittered delay d for
// retry n; their Jitter field randomises it: [NoJitter] uses d, [FullJitter]
// draws from [0, d], [EqualJitter] from [d/2, d], [PercentJitter] from
// [d·(1−p), d·(1+p)]. [Decorrelated] is Brooker's decorrelated jitter, which
// draws from [Base, 3·prev] and needs the previous delay fed back. [Default]
// is exponential, doubling from 100 ms, full jitter, capped at 3 s.
//
// # Index convention
//
// n = 1 is the first retry (the second attempt), and its un-jittered delay,
// the ceiling of the draw under full jitter, is Base. Brooker's simulator for
// "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015) increments
// its counter before the first backoff and so uses 2·base for its first
// retry: to reproduce his schedule, set Base to twice his base (10 ms for his
// 5 ms). Decorrelated ignores n and starts from prev = Base, as his does.
//
// # The cap
//
// Cap bounds the delay that is returned, after jitter: Delay never returns
// more than a positive Cap, whatever the jitter mode adds (percent jitter can
// push d above it, and is then clamped). The shape is capped
// before the draw too, so full and equal jitter spread uniformly below the
// cap instead of bunching at it. Decorrelated caps only after its draw, as
// Brooker's does: after a delay of Cap about two thirds of the next draws
// are clamped to exactly Cap, and over a long run about a third of all its
// delays are exactly Cap (see [Polly#530]). Cap 0 means no cap: delays then saturate at
// the largest [time.Duration] and never overflow, whatever n, Base or Factor.
//
// # Invalid configuration
//
// Delay never panics and never returns a negative duration. Every invalid
// field has one documented correction: a negative Base, Step or Cap is
// treated as 0 (so a negative Cap means no cap); a Cap below Base wins, so
// every delay is at most Cap; a Factor that is 0, below 1, infinite or NaN
// is treated as 2; a Percent outside [0, 1] is clamped into it (NaN as 0),
// and 0 means [DefaultPercent]; an unknown Jitter mode behaves as
// [NoJitter]. [Constant] treats a negative d as 0. Callers that would rather
// refuse such values call the Validate method, which reports every one of
// them in one error and returns nil for a valid configuration.
//
// # Randomness
//
// Every Delay takes a *rand.Rand from math/rand/v2. Nil means the package's
// top-level generator, which is seeded automatically and independently per
// process and is safe and cheap for concurrent use; this is what production
// code should pass. Tests pass their own rand.New(rand.NewPCG(seed1, seed2))
// to get a reproducible schedule; a *rand.Rand is not safe for concurrent
// use, so give each goroutine its own. Never share a seeded generator
// between processes or clients: every client would then draw the same
// "random" delays and retry in lockstep, the herd jitter exists to break
// (see [cenkalti/backoff#41]).
//
// # The default schedule
//
// [Default] retries n = 1, 2, 3, … with ceiling min(3 s, 100 ms·2^(n−1)) and
// a delay drawn uniformly from [0, ceiling). The cumulative worst case is the
// sum of the ceilings, the longest the waits alone can take; the mean is half
// of it.
//
//	retry n   ceiling   drawn delay     cumulative worst case
//	      1     100ms   [0, 100ms)       100ms
//	      2     200ms   [0, 200ms)       300ms
//	      3     400ms   [0, 400ms)       700ms
//	      4     800ms   [0, 800ms)       1.5s
//	      5      1.6s   [0, 1.6s)        3.1s
//	      6        3s   [0, 3s)          6.1s
//	      7        3s   [0, 3s)          9.1s
//	      8        3s   [0, 3s)          12.1s
//	   n ≥ 6       3s   [0, 3s)          3.1s + 3s·(n−5)
//
// With httpretry's default of 4 attempts (3 retries) the waits of one call
// add up to at most 700 ms, 350 ms on average.
//
// [Polly#530]: https://github.com/App-vNext/Polly/issues/530
// [cenkalti/backoff#41]: https://github.com/cenkalti/backoff/issues/41
package backoff
