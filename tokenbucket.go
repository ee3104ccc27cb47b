package httpretry

import (
	"fmt"
	"sync/atomic"
)

// TokenBucketConfig configures a TokenBucket. Zero fields take the AWS SDK
// retry-quota defaults; negative fields are treated as zero.
type TokenBucketConfig struct {
	Capacity      int // tokens when full, and at the start; 0 means 500
	RetryCost     int // tokens a retry takes; 0 means 5
	TimeoutCost   int // tokens a retry after an attempt timeout takes; 0 means 10
	SuccessCredit int // tokens a success without retries returns; 0 means 1
}

// TokenBucket is a success-funded retry budget, the retry quota of the AWS
// SDKs. It starts full. A retry takes RetryCost tokens (TimeoutCost after a
// timeout) and is refused when the bucket holds fewer; a request that
// succeeds without retrying returns SuccessCredit tokens, and one that
// succeeds after retrying gets its last retry's cost back.
//
// With the defaults, a fresh bucket allows 100 retries during a total
// outage and then none until successes refill it: attempts per request tend
// to 1 (1.033 over 300 s at 10 requests per second, in the bench module's
// storm simulation). Because a retry that succeeds gets its cost back, with
// 4 attempts the bucket only drains once about 30 % of attempts fail
// independently; below that it is never seen. It ignores time. It is safe
// for concurrent use and never blocks; the success path is one atomic load
// when the bucket is full. Create one with NewTokenBucket: the zero value
// has no capacity and no cost, and allows every retry.
type TokenBucket struct {
	capacity, retryCost, timeoutCost, credit int64
	tokens                                   atomic.Int64
}

// NewTokenBucket returns a full bucket.
func NewTokenBucket(c TokenBucketConfig) *TokenBucket {
	or := func(v, def int) int64 {
		if v <= 0 {
			return int64(def)
		}
		return int64(v)
	}
	b := &TokenBucket{
		capacity:    or(c.Capacity, 500),
		retryCost:   or(c.RetryCost, 5),
		timeoutCost: or(c.TimeoutCost, 10),
		credit:      or(c.SuccessCredit, 1),
	}
	b.tokens.Store(b.capacity)
	return b
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

// Tokens returns the tokens in the bucket now.
func (b *TokenBucket) Tokens() int { return int(b.tokens.Load()) }

// Level returns the tokens in the bucket and its capacity.
func (b *TokenBucket) Level() (available, capacity float64) {
	return float64(b.tokens.Load()), float64(b.capacity)
}

// String describes the bucket's state, as logged with each attempt.
func (b *TokenBucket) String() string {
	return fmt.Sprintf("tokens %d/%d", b.tokens.Load(), b.capacity)
}

// full reports whether the bucket is as a new one is.
func (b *TokenBucket) full() bool { return b.tokens.Load() >= b.capacity }
