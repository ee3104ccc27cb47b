// Package budget holds the engines of httpretry's retry budgets: the token
// bucket of the AWS SDKs and a ratio of retries to requests over a sliding
// window. The root package's TokenBucket and RatioBudget wrap them; the
// simulations of the bench module drive them on a virtual clock through
// their At forms, as golang.org/x/time/rate's AllowN does. The zero value of
// each allows every retry.
package budget

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry/internal/window"
)

// TokenBucket is the token bucket: see the root package's TokenBucket.
type TokenBucket struct {
	capacity, retryCost, timeoutCost, credit int64
	tokens                                   atomic.Int64
}

// Init makes b a full bucket of capacity tokens, where a retry costs
// retryCost (timeoutCost after an attempt timeout) and a success without
// retries returns credit. A value of 0 or less takes the AWS SDKs' default:
// 500, 5, 10 and 1.
func (b *TokenBucket) Init(capacity, retryCost, timeoutCost, credit int) {
	or := func(v, def int) int64 {
		if v <= 0 {
			return int64(def)
		}
		return int64(v)
	}
	b.capacity = or(capacity, 500)
	b.retryCost = or(retryCost, 5)
	b.timeoutCost = or(timeoutCost, 10)
	b.credit = or(credit, 1)
	b.tokens.Store(b.capacity)
}

// Begin does nothing: the bucket is funded by outcomes, not by requests.
func (b *TokenBucket) Begin() {}

func (b *TokenBucket) cost(timeout bool) int64 {
	if timeout {
		return b.timeoutCost
	}
	return b.retryCost
}

// AllowRetry takes the cost of a retry if the bucket holds it.
func (b *TokenBucket) AllowRetry(timeout bool) bool {
	cost := b.cost(timeout)
	for {
		t := b.tokens.Load()
		if t < cost {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-cost) {
			return true
		}
	}
}

// Refund gives back the cost of a retry that was allowed but not sent.
func (b *TokenBucket) Refund(timeout bool) { b.add(b.cost(timeout)) }

// Succeeded returns tokens to the bucket, never above its capacity.
func (b *TokenBucket) Succeeded(retried, timeout bool) {
	n := b.credit
	if retried {
		n = b.cost(timeout)
	}
	b.add(n)
}

func (b *TokenBucket) add(n int64) {
	for {
		t := b.tokens.Load()
		if t >= b.capacity {
			return
		}
		if b.tokens.CompareAndSwap(t, t+min(n, b.capacity-t)) { // no overflow, whatever the config
			return
		}
	}
}

// Level returns the tokens in the bucket and its capacity.
func (b *TokenBucket) Level() (available, capacity float64) {
	return float64(b.tokens.Load()), float64(b.capacity)
}

// String describes the bucket's state, as logged with each attempt.
func (b *TokenBucket) String() string {
	return fmt.Sprintf("tokens %d/%d", b.tokens.Load(), b.capacity)
}

// Ratio is the ratio budget: see the root package's RatioBudget.
type Ratio struct {
	ratio, floor float64
	w            window.Window // counters: ratioRequests, ratioRetries
}

const (
	ratioRequests = iota
	ratioRetries
)

// Init makes b an empty ratio budget: at most ratio retries per request
// over a sliding window of length, with a floor of minPerSecond retries a
// second counted over it. Zero or nonsense values take the defaults (0.1,
// 10 s, 1); a negative minPerSecond means no floor. Nonsense values (NaN,
// negative ratio or window) are treated as zero, which selects the default.
func (b *Ratio) Init(ratio float64, length time.Duration, minPerSecond float64) {
	if !(ratio > 0) || math.IsInf(ratio, 0) {
		ratio = 0.1
	}
	if length <= 0 {
		length = 10 * time.Second
	}
	floor := minPerSecond
	switch {
	case floor == 0 || math.IsNaN(floor):
		floor = 1
	case floor < 0:
		floor = 0
	}
	b.ratio = ratio
	b.floor = min(floor, math.MaxFloat64/length.Seconds()) * length.Seconds()
	b.w = window.New(length)
}

// Begin counts a request now.
func (b *Ratio) Begin() { b.BeginAt(time.Now()) }

// BeginAt counts a request at now.
func (b *Ratio) BeginAt(now time.Time) { b.w.Add(now, ratioRequests, 1) }

// AllowRetry counts and allows a retry now if the window has room for it.
func (b *Ratio) AllowRetry(timeout bool) bool { return b.AllowRetryAt(time.Now(), timeout) }

// AllowRetryAt counts and allows a retry at now if the window has room for
// it.
func (b *Ratio) AllowRetryAt(now time.Time, _ bool) bool {
	if b.zero() {
		return true
	}
	sums := b.w.Sums(now)
	if sums[ratioRetries] >= max(b.ratio*sums[ratioRequests], b.floor) {
		return false
	}
	b.w.Add(now, ratioRetries, 1)
	return true
}

// Refund uncounts a retry that was allowed but not sent.
func (b *Ratio) Refund(timeout bool) { b.RefundAt(time.Now(), timeout) }

// RefundAt uncounts, at now, a retry that was allowed but not sent, in the
// slot of the window that counted it.
func (b *Ratio) RefundAt(now time.Time, _ bool) { b.w.Take(now, ratioRetries) }

// Succeeded does nothing: the ratio counts requests, not outcomes.
func (b *Ratio) Succeeded(bool, bool) {}

// Level returns the retries the window still allows now and the window's
// allowance.
func (b *Ratio) Level() (available, capacity float64) {
	return b.LevelAt(time.Now())
}

// LevelAt returns the retries the window allows at now and its allowance.
func (b *Ratio) LevelAt(now time.Time) (available, capacity float64) {
	if b.zero() {
		return 0, 0
	}
	sums := b.w.Sums(now)
	capacity = max(b.ratio*sums[ratioRequests], b.floor)
	return max(capacity-sums[ratioRetries], 0), capacity
}

// String describes the budget's state, as logged with each attempt.
func (b *Ratio) String() string {
	avail, capacity := b.Level()
	return fmt.Sprintf("ratio %.2f, %.0f/%.0f retries left", b.ratio, avail, capacity)
}

// zero reports whether b is the zero Ratio, which allows every retry.
func (b *Ratio) zero() bool { return b.ratio == 0 && b.floor == 0 }
