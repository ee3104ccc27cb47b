package httpretry

import (
	"math"
	"sync/atomic"
)

// hedgeTokenUnits is one token of a hedgeBudget in its fixed-point units,
// fine enough for a ratio of one hedge per million requests.
const hedgeTokenUnits = 1 << 20

// hedgeBudget caps the hedges sent to one host at a fraction of its
// requests, a token bucket in the manner of gRPC's retry throttling: each
// request earns ratio of a token, a hedge costs a whole one, and the bucket
// holds at most burst tokens. It starts full. Over any run of n requests
// it allows at most ratio·n + burst hedges, however slow the host: when
// every request is slow (a brownout), hedging adds at most about ratio to
// the load instead of doubling it.
//
// A hedge sent on time (at the hedge delay) may not take the last keep
// tokens; a late one, for an attempt still unanswered well past the delay,
// may. When hedges on time alone would spend the budget (a host whose
// ordinary latency has a long tail, so that its slow-but-fine attempts ask
// for as many hedges as the budget earns), the attempts that are stuck
// still find a token.
//
// It is independent of the retry budget, and a hedge that wins is not
// refunded: it was extra load whatever its outcome. Tokens are earned per
// request rather than per success, so a host that fails fast does not
// starve hedging of a host that is merely slow; failures are the retry
// budget's and the breaker's business.
//
// It is lock-free and never blocks. While the bucket is full, which is the
// steady state of a host that rarely needs hedges, a request costs one
// atomic load and no write.
type hedgeBudget struct {
	earn, capacity, keep int64 // in hedgeTokenUnits
	units                atomic.Int64
}

// newHedgeBudget returns a full budget that allows ratio hedges per request
// (0 < ratio ≤ 1) and bursts of up to burst (≥ 1) hedges, keep (< burst)
// of them for late hedges only.
func newHedgeBudget(ratio float64, burst, keep int) *hedgeBudget {
	b := &hedgeBudget{
		earn:     max(int64(math.Ceil(ratio*hedgeTokenUnits)), 1), // 1/ratio requests earn a whole token
		capacity: int64(max(burst, 1)) * hedgeTokenUnits,
	}
	b.keep = min(int64(max(keep, 0))*hedgeTokenUnits, b.capacity-hedgeTokenUnits)
	b.units.Store(b.capacity)
	return b
}

// request credits the budget for one request to the host.
func (b *hedgeBudget) request() {
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

// allow reports whether a hedge may be sent and, when it may, takes its
// token. A hedge on time (late false) leaves the kept tokens.
func (b *hedgeBudget) allow(late bool) bool {
	need := int64(hedgeTokenUnits)
	if !late {
		need += b.keep
	}
	for {
		u := b.units.Load()
		if u < need {
			return false
		}
		if b.units.CompareAndSwap(u, u-hedgeTokenUnits) {
			return true
		}
	}
}

// refund gives back the token of a hedge that was allowed but not sent
// (its body could not be replayed, the breaker refused it). A hedge that
// was sent is never refunded, whether it won or lost.
func (b *hedgeBudget) refund() {
	for {
		u := b.units.Load()
		if b.units.CompareAndSwap(u, min(u+hedgeTokenUnits, b.capacity)) {
			return
		}
	}
}

// atRest reports whether the budget is full, and so behaves exactly as a
// new one.
func (b *hedgeBudget) atRest() bool { return b.units.Load() >= b.capacity }

// tokens returns the hedges the budget would allow now, as a fraction.
func (b *hedgeBudget) tokens() float64 {
	return float64(b.units.Load()) / hedgeTokenUnits
}
