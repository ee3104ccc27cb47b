package httpretry

import (
	"fmt"
	"math"
	"time"
)

// RatioConfig configures a RatioBudget. Zero fields take the defaults.
type RatioConfig struct {
	// Ratio is the largest share of retries among requests in the window;
	// 0 means 0.1, the SRE book's per-client budget.
	Ratio float64
	// Window is the sliding window the ratio is measured over, with a
	// resolution of one tenth of it; 0 means 10 s.
	Window time.Duration
	// MinPerSecond is a floor of retries per second always allowed, so that
	// a host with little traffic can still retry, counted over the window
	// (1 per second over 10 s allows 10 at once from a quiet start); 0 means
	// 1. A negative value means no floor.
	MinPerSecond float64
}

// RatioBudget allows a retry while retries in the sliding window stay below
// Ratio × requests in it, or below the MinPerSecond floor. Under sustained
// total failure, attempts per request settle at about 1 + Ratio. The window
// has a resolution of a tenth of its length; the oldest tenth fades out as
// the newest fills, so the allowance is released smoothly. It is safe for
// concurrent use and lock-free; counts at a slot boundary are approximate by
// a few requests.
//
// The methods of the Budget interface read the clock; their At forms take
// the time instead, for simulations on a virtual clock, as
// golang.org/x/time/rate's AllowN does. Any time.Time is accepted, before
// 1970 included. Create one with NewRatioBudget: the zero value has no
// ratio and no floor, and refuses every retry.
type RatioBudget struct {
	ratio, floor float64
	w            window // counters: ratioRequests, ratioRetries
}

const (
	ratioRequests = iota
	ratioRetries
)

// NewRatioBudget returns an empty ratio budget. Nonsense values (NaN,
// negative ratio or window) are treated as zero, which selects the default.
func NewRatioBudget(c RatioConfig) *RatioBudget {
	ratio := c.Ratio
	if !(ratio > 0) || math.IsInf(ratio, 0) {
		ratio = 0.1
	}
	window := c.Window
	if window <= 0 {
		window = 10 * time.Second
	}
	floor := c.MinPerSecond
	switch {
	case floor == 0 || math.IsNaN(floor):
		floor = 1
	case floor < 0:
		floor = 0
	}
	return &RatioBudget{
		ratio: ratio,
		floor: min(floor, math.MaxFloat64/window.Seconds()) * window.Seconds(),
		w:     newWindow(window),
	}
}

// Begin counts a request now.
func (b *RatioBudget) Begin() { b.BeginAt(time.Now()) }

// BeginAt counts a request at now.
func (b *RatioBudget) BeginAt(now time.Time) { b.w.add(now, ratioRequests, 1) }

// AllowRetry counts and allows a retry now if the window has room for it.
func (b *RatioBudget) AllowRetry(timeout bool) bool { return b.AllowRetryAt(time.Now(), timeout) }

// AllowRetryAt counts and allows a retry at now if the window has room for
// it.
func (b *RatioBudget) AllowRetryAt(now time.Time, _ bool) bool {
	sums := b.w.sums(now)
	if sums[ratioRetries] >= max(b.ratio*sums[ratioRequests], b.floor) {
		return false
	}
	b.w.add(now, ratioRetries, 1)
	return true
}

// Refund uncounts a retry that was allowed but not sent.
func (b *RatioBudget) Refund(timeout bool) { b.RefundAt(time.Now(), timeout) }

// RefundAt uncounts, at now, a retry that was allowed but not sent, in the
// slot of the window that counted it.
func (b *RatioBudget) RefundAt(now time.Time, _ bool) { b.w.take(now, ratioRetries) }

// Succeeded does nothing: the ratio counts requests, not outcomes.
func (b *RatioBudget) Succeeded(bool, bool) {}

// Level returns the retries the window still allows now and the window's
// allowance.
func (b *RatioBudget) Level() (available, capacity float64) {
	return b.LevelAt(time.Now())
}

// LevelAt returns the retries the window allows at now and its allowance.
func (b *RatioBudget) LevelAt(now time.Time) (available, capacity float64) {
	sums := b.w.sums(now)
	capacity = max(b.ratio*sums[ratioRequests], b.floor)
	return max(capacity-sums[ratioRetries], 0), capacity
}

// String describes the budget's state, as logged with each attempt.
func (b *RatioBudget) String() string {
	avail, capacity := b.Level()
	return fmt.Sprintf("ratio %.2f, %.0f/%.0f retries left", b.ratio, avail, capacity)
}

// idle reports whether no retry is counted in the window at now: the
// budget then allows what a new one would.
func (b *RatioBudget) idle(now time.Time) bool {
	return b.w.sums(now)[ratioRetries] <= 0
}
