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
// every request is slow (a brownout), hedging adds at most ratio to the
// load instead of doubling it.
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
	earn, capacity int64 // in hedgeTokenUnits
	units          atomic.Int64
}

// newHedgeBudget returns a full budget that allows ratio hedges per request
// (0 < ratio ≤ 1) and bursts of up to burst (≥ 1) hedges.
func newHedgeBudget(ratio float64, burst int) *hedgeBudget {
	b := &hedgeBudget{
		earn:     max(int64(math.Round(ratio*hedgeTokenUnits)), 1),
		capacity: int64(max(burst, 1)) * hedgeTokenUnits,
	}
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
// token.
func (b *hedgeBudget) allow() bool {
	for {
		u := b.units.Load()
		if u < hedgeTokenUnits {
			return false
		}
		if b.units.CompareAndSwap(u, u-hedgeTokenUnits) {
			return true
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
