package backoff

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// A Strategy computes how long to wait before a retry.
//
// Delay returns the wait before retry n, where n = 1 is the first retry
// (the second attempt). prev is the delay this strategy returned for the
// previous retry of the same operation, or 0 before the first retry; only
// strategies that need it (see [Decorrelated]) read it, so the caller's loop
// carries that state and the Strategy itself stays stateless. r is the source
// of randomness; nil means the goroutine-safe, automatically seeded
// generator of math/rand/v2.
//
// Implementations must be safe for concurrent use and must return a
// non-negative duration for every n, prev and r.
type Strategy interface {
	Delay(n int, prev time.Duration, r *rand.Rand) time.Duration
}

// Jitter says how a strategy randomises the un-jittered delay d of its shape.
// Every mode keeps the result within [0, cap].
type Jitter int

const (
	// NoJitter uses d itself. Clients that failed together retry together:
	// use it only where a single client backs off alone.
	NoJitter Jitter = iota
	// FullJitter draws uniformly from [0, d]. It spreads a herd of clients
	// the most evenly and is the default (Brooker 2015).
	FullJitter
	// EqualJitter draws uniformly from [d/2, d]: never less than half the
	// delay, at the cost of a longer mean wait.
	EqualJitter
	// PercentJitter draws uniformly from [d·(1−p), d·(1+p)], p taken from the
	// strategy's Percent field. Once d·(1+p) would pass the cap, d is lowered
	// to cap/(1+p), so the spread stays whole below the cap instead of piling
	// up on it. It keeps the schedule recognisable but is not a herd
	// control: clients stay clustered around d.
	PercentJitter
)

// String returns the mode's name as used in docs and logs.
func (j Jitter) String() string {
	switch j {
	case NoJitter:
		return "none"
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case PercentJitter:
		return "percent"
	}
	return fmt.Sprintf("Jitter(%d)", int(j))
}

// DefaultPercent is the spread PercentJitter uses when Percent is 0: ±10 %.
const DefaultPercent = 0.1

// Default returns the strategy httpretry uses when a policy names none:
// exponential, doubling from 100 ms, full jitter, never more than 3 s.
//
// The ceilings for retries 1, 2, 3, … are 100 ms, 200 ms, 400 ms, 800 ms,
// 1.6 s, then 3 s from the sixth retry on; each delay is drawn uniformly
// below its ceiling.
func Default() Exponential {
	return Exponential{
		Base:   100 * time.Millisecond,
		Factor: 2,
		Cap:    3 * time.Second,
		Jitter: FullJitter,
	}
}

// Constant returns a strategy that waits d before every retry, without
// jitter. A negative d is treated as 0.
func Constant(d time.Duration) Strategy {
	return constant(max(d, 0))
}

type constant time.Duration

func (c constant) Delay(int, time.Duration, *rand.Rand) time.Duration { return time.Duration(c) }

// Exponential grows the delay geometrically: before retry n the un-jittered
// delay is Base·Factor^(n−1), so the first retry's ceiling is Base itself.
// (Brooker's simulator counts from one higher and uses 2·Base for the first
// retry; set Base to twice his base to reproduce his schedule.)
//
// The zero value waits 0. Invalid fields have one documented behaviour and
// never cause a panic: a negative Base or Cap is treated as 0, a Factor that
// is 0, below 1 or not a number is treated as 2, Cap 0 means no cap, a Cap
// below Base wins (every delay is at most Cap), and Percent outside [0, 1] is
// clamped into it. [Exponential.Validate] reports such values as an error for
// callers that want to refuse them.
type Exponential struct {
	Base    time.Duration // delay before the first retry, before jitter
	Factor  float64       // growth per retry; 0 means 2
	Cap     time.Duration // hard ceiling on the final delay, after jitter; 0 means none
	Jitter  Jitter        // randomisation of each delay; the zero value is NoJitter
	Percent float64       // spread for PercentJitter; 0 means DefaultPercent
}

// Delay returns the wait before retry n. It is safe for concurrent use.
func (e Exponential) Delay(n int, _ time.Duration, r *rand.Rand) time.Duration {
	base := max(e.Base, 0)
	factor := e.Factor
	if !(factor >= 1) || math.IsInf(factor, 0) {
		factor = 2
	}
	var d float64
	switch {
	case n <= 1 || factor == 1:
		d = float64(base)
	case factor == 2 && n <= 63:
		d = float64(base) * float64(uint64(1)<<(n-1)) // exact, as Ldexp but cheaper
	case factor == 2:
		d = math.Ldexp(float64(base), min(n-1, 1100))
	case uint64(n) <= 1<<53: // n−1 exact as a float64, so Pow sees the same exponent
		d = float64(base) * powInt(factor, n-1)
	default:
		d = float64(base) * math.Pow(factor, float64(n-1))
	}
	return jitter(e.Jitter, e.Percent, d, e.Cap, r)
}

// powInt returns x^k for x > 1 and k ≥ 1. It multiplies in the same order as
// math.Pow does for an integral exponent, so the result is the same (for
// x > 1 scaling by powers of two is exact until overflow, and overflow gives
// +Inf in both), at half the cost: Pow's special cases and Frexp/Ldexp are
// the bulk of a Delay call.
func powInt(x float64, k int) float64 {
	acc := 1.0
	for ; k > 0; k >>= 1 {
		if k&1 == 1 {
			acc *= x
		}
		x *= x
	}
	return acc
}

// Validate reports fields that Delay would have to correct.
func (e Exponential) Validate() error {
	return errors.Join(
		checkDurations(e.Base, e.Cap),
		checkFactor(e.Factor),
		checkJitter(e.Jitter, e.Percent),
	)
}

// Linear grows the delay by a fixed step: before retry n the un-jittered
// delay is Base + Step·(n−1).
//
// Fields are corrected as for [Exponential]: negative durations are treated
// as 0, Cap 0 means no cap and a Cap below Base wins.
type Linear struct {
	Base    time.Duration // delay before the first retry, before jitter
	Step    time.Duration // added for each further retry
	Cap     time.Duration // hard ceiling on the final delay, after jitter; 0 means none
	Jitter  Jitter        // randomisation of each delay; the zero value is NoJitter
	Percent float64       // spread for PercentJitter; 0 means DefaultPercent
}

// Delay returns the wait before retry n. It is safe for concurrent use.
func (l Linear) Delay(n int, _ time.Duration, r *rand.Rand) time.Duration {
	d := float64(max(l.Base, 0)) + float64(max(l.Step, 0))*float64(max(n, 1)-1)
	return jitter(l.Jitter, l.Percent, d, l.Cap, r)
}

// Validate reports fields that Delay would have to correct.
func (l Linear) Validate() error {
	var err error
	if l.Step < 0 {
		err = fmt.Errorf("backoff: negative step %v", l.Step)
	}
	return errors.Join(checkDurations(l.Base, l.Cap), err, checkJitter(l.Jitter, l.Percent))
}

// Decorrelated is Brooker's decorrelated jitter: each delay is drawn
// uniformly from [Base, 3·prev] and then capped, where prev is the previous
// delay (Base before the first retry). It ignores the retry number; the
// caller passes prev back in.
//
// After a delay of Cap, about two thirds of the next draws land above it and
// are clamped to exactly Cap; over a long run about a third of all delays
// are exactly Cap (0.31 for Cap = 100·Base), so clients that have been
// failing for a while bunch at the cap (Polly issue 530). Prefer [FullJitter] on an
// [Exponential] when spreading a herd matters most.
//
// Fields are corrected as for [Exponential]: negative durations are treated
// as 0, Cap 0 means no cap and a Cap below Base wins.
type Decorrelated struct {
	Base time.Duration // smallest delay
	Cap  time.Duration // hard ceiling on every delay; 0 means none
}

// Delay returns the wait before the next retry given the previous one.
// It is safe for concurrent use.
func (dc Decorrelated) Delay(_ int, prev time.Duration, r *rand.Rand) time.Duration {
	base := float64(max(dc.Base, 0))
	hi := 3 * max(float64(prev), base)
	return clamp(base+(hi-base)*uniform(r), dc.Cap)
}

// Validate reports fields that Delay would have to correct.
func (dc Decorrelated) Validate() error {
	return checkDurations(dc.Base, dc.Cap)
}

// maxDuration as a float64: 2^63 ns, one past the largest Duration.
const maxDurationF = float64(math.MaxInt64)

func capOf(c time.Duration) float64 {
	if c <= 0 {
		return maxDurationF
	}
	return float64(c)
}

// jitter randomises d by mode j and clamps the result into [0, c]. The
// shape is capped before jitter too, so full and equal jitter spread below
// the cap instead of bunching at it.
func jitter(j Jitter, p, d float64, c time.Duration, r *rand.Rand) time.Duration {
	d = min(d, capOf(c))
	switch j {
	case FullJitter:
		d *= uniform(r)
	case EqualJitter:
		d = d/2 + d/2*uniform(r)
	case PercentJitter:
		if p == 0 {
			p = DefaultPercent
		}
		if !(p >= 0) {
			p = 0
		}
		p = min(p, 1)
		// Near the cap, centre the spread on cap/(1+p) so the whole range
		// fits below the cap: clamping the top of it to the cap would put a
		// share of the clients on exactly the same delay again.
		if c > 0 {
			d = min(d, float64(c)/(1+p))
		}
		d *= 1 - p + 2*p*uniform(r)
	}
	return clamp(d, c)
}

// clamp converts d to a Duration in [0, c], where c ≤ 0 means no cap. The
// cap is applied to the integer: above 2^53 ns float64(c) can round up past
// c, and the result must never exceed c.
func clamp(d float64, c time.Duration) time.Duration {
	var v time.Duration
	switch {
	case !(d > 0):
		return 0
	case d >= maxDurationF:
		v = math.MaxInt64
	default:
		v = time.Duration(d)
	}
	if c > 0 {
		v = min(v, c)
	}
	return v
}

func uniform(r *rand.Rand) float64 {
	if r == nil {
		return rand.Float64()
	}
	return r.Float64()
}

func checkDurations(base, capd time.Duration) error {
	switch {
	case base < 0:
		return fmt.Errorf("backoff: negative base %v", base)
	case capd < 0:
		return fmt.Errorf("backoff: negative cap %v", capd)
	case capd > 0 && capd < base:
		return fmt.Errorf("backoff: cap %v below base %v", capd, base)
	}
	return nil
}

func checkFactor(f float64) error {
	if f == 0 || (f >= 1 && !math.IsInf(f, 0)) {
		return nil
	}
	return fmt.Errorf("backoff: factor %v is not a finite number ≥ 1", f)
}

func checkJitter(j Jitter, p float64) error {
	if j < NoJitter || j > PercentJitter {
		return fmt.Errorf("backoff: unknown jitter mode %d", int(j))
	}
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("backoff: percent %v outside [0, 1]", p)
	}
	return nil
}
