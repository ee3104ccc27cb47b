// Package hedgebudget caps the hedges sent to one host at a share of its
// requests, independently of the retry budget.
package hedgebudget

import (
	"math"
	"sync/atomic"
)

// The hedge budget every host gets: each hedged request earns Ratio of a
// hedge, the bucket holds Burst, and a hedge on time leaves the last Keep
// to attempts still unanswered at twice the
// delay. Hedging after the p95 "limits the additional load to
// approximately 5 %" (Dean and Barroso, The Tail at Scale, 2013); the
// budget makes 5 % a ceiling that holds when every request is slow: over
// the 400 requests of a 10 s brownout at 200 ms and concurrency 8
// (docs/performance.md's T2), at most 0.04 × 400 + 4 = 20 hedges. See
// docs/hedging.md.
const (
	Ratio = 0.04
	Burst = 4
	Keep  = 1
)

// tokenUnits is one token of a Budget in its fixed-point units,
// fine enough for a ratio of one hedge per million requests.
const tokenUnits = 1 << 20

// Budget caps the hedges sent to one host at a fraction of its
// requests, a token bucket in the manner of gRPC's retry throttling: each
// Request earns ratio of a token, a hedge costs a whole one, and the bucket
// holds at most burst tokens. It starts full. Over any run of n requests
// it allows at most ratio·n + burst hedges, however slow the host: when
// every request is slow (a brownout), hedging adds at most about ratio to
// the load instead of doubling it.
//
// A hedge sent on time (at the hedge delay) may not take the last keep
// Tokens; a late one, for an attempt still unanswered well past the delay,
// may. When hedges on time alone would spend the budget (a host whose
// ordinary latency has a long tail, so that its slow-but-fine attempts ask
// for as many hedges as the budget earns), the attempts that are stuck
// still find a token.
//
// It is independent of the retry budget, and a hedge that wins is not
// refunded: it was extra load whatever its outcome. Tokens are earned per
// Request rather than per success, so a host that fails fast does not
// starve hedging of a host that is merely slow; failures are the retry
// budget's and the breaker's business.
//
// It is lock-free and never blocks. While the bucket is full, which is the
// steady state of a host that rarely needs hedges, a request costs one
// atomic load and no write.
type Budget struct {
	earn, capacity, keep int64 // in hedgeTokenUnits
	units                atomic.Int64
}

// New returns a full budget that allows ratio hedges per request
// (0 < ratio ≤ 1) and bursts of up to burst (≥ 1) hedges, keep (< burst)
// of them for late hedges only.
func New(ratio float64, burst, keep int) *Budget {
	b := &Budget{
		earn:     max(int64(math.Ceil(ratio*tokenUnits)), 1), // 1/ratio requests earn a whole token
		capacity: int64(max(burst, 1)) * tokenUnits,
	}
	b.keep = min(int64(max(keep, 0))*tokenUnits, b.capacity-tokenUnits)
	b.units.Store(b.capacity)
	return b
}

// Request credits the budget for one request to the host.
func (b *Budget) Request() {
	for {
		u := b.units.Load()
		if u >= b.capacity {
			return
		}
		if b.units.CompareAndSwap(u, min(u+b.earn, b.capacity)) {
			return
		}
	}
}

// Allow reports whether a hedge may be sent and, when it may, takes its
// token. A hedge on time (late false) leaves the kept tokens.
func (b *Budget) Allow(late bool) bool {
	need := int64(tokenUnits)
	if !late {
		need += b.keep
	}
	for {
		u := b.units.Load()
		if u < need {
			return false
		}
		if b.units.CompareAndSwap(u, u-tokenUnits) {
			return true
		}
	}
}

// Refund gives back the token of a hedge that was allowed but not sent
// (its body could not be replayed, the breaker refused it). A hedge that
// was sent is never refunded, whether it won or lost.
func (b *Budget) Refund() {
	for {
		u := b.units.Load()
		if b.units.CompareAndSwap(u, min(u+tokenUnits, b.capacity)) {
			return
		}
	}
}

// AtRest reports whether the budget is full, and so behaves exactly as a
// new one.
func (b *Budget) AtRest() bool { return b.units.Load() >= b.capacity }

// Tokens returns the hedges the budget would allow now, as a fraction.
func (b *Budget) Tokens() float64 {
	return float64(b.units.Load()) / tokenUnits
}
