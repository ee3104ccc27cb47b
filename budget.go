package httpretry

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// A Budget limits the retries sent to one host, so that a dependency's
// outage is not multiplied into a retry storm. Retries are selfish: when
// failures come from overload, every retry adds load exactly when the
// dependency can least take it. A budget lets retries through while failures
// are rare and stops them when failures are sustained.
//
// The Transport keeps one Budget per host (per "host:port"), created by
// Policy.NewBudget, and calls it from many goroutines at once. Methods take
// the current time so that simulations can drive a budget on a virtual
// clock; the Transport reads the clock once per request where it can, so
// now may lag by the duration of an attempt. Implementations must not
// block. A nil Budget allows every retry.
type Budget interface {
	// Begin records that a logical request to the host starts.
	Begin(now time.Time)

	// AllowRetry reports whether a retry may be sent now and, when it may,
	// charges for it. timeout marks a retry after an attempt timeout, which
	// some budgets charge more.
	AllowRetry(now time.Time, timeout bool) bool

	// Succeeded records that a logical request ended in success. retried
	// reports whether it took at least one retry, and timeout whether the
	// last retry was charged as a timeout retry.
	Succeeded(now time.Time, retried, timeout bool)
}

// DefaultBudget returns the budget a Policy uses when NewBudget is nil: a
// token bucket with the AWS SDK's retry-quota numbers (see TokenBucket).
func DefaultBudget() Budget { return NewTokenBucket(TokenBucketConfig{}) }

// NoBudget, as Policy.NewBudget, turns retry budgeting off: every retry that
// the rest of the policy allows is sent.
func NoBudget() Budget { return nil }

// TokenBucketConfig configures a TokenBucket. Zero fields take the AWS SDK
// retry-quota defaults.
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
// independently; below that it is never seen. It is safe for
// concurrent use and never blocks; the success path is one atomic load when
// the bucket is full.
type TokenBucket struct {
	capacity, retryCost, timeoutCost, credit int64
	tokens                                   atomic.Int64
}

// NewTokenBucket returns a full bucket. Negative fields are treated as zero,
// which selects the default.
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
func (b *TokenBucket) Begin(time.Time) {}

// clockless is implemented by budgets that ignore the time they are given,
// so the Transport can spare a clock read on every request.
type clockless interface{ clockless() }

func (*TokenBucket) clockless() {}

// AllowRetry takes the cost of a retry if the bucket holds it.
func (b *TokenBucket) AllowRetry(_ time.Time, timeout bool) bool {
	cost := b.retryCost
	if timeout {
		cost = b.timeoutCost
	}
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

// Succeeded returns tokens to the bucket, never above its capacity.
func (b *TokenBucket) Succeeded(_ time.Time, retried, timeout bool) {
	n := b.credit
	switch {
	case retried && timeout:
		n = b.timeoutCost
	case retried:
		n = b.retryCost
	}
	for {
		t := b.tokens.Load()
		if t >= b.capacity {
			return
		}
		if b.tokens.CompareAndSwap(t, min(t+n, b.capacity)) {
			return
		}
	}
}

// Tokens returns the tokens in the bucket now.
func (b *TokenBucket) Tokens() int { return int(b.tokens.Load()) }

// String describes the bucket's state, as logged with each attempt.
func (b *TokenBucket) String() string {
	return fmt.Sprintf("tokens %d/%d", b.tokens.Load(), b.capacity)
}

// RatioConfig configures a RatioBudget. Zero fields take the defaults.
type RatioConfig struct {
	// Ratio is the largest share of retries among requests in the window;
	// 0 means 0.1, the SRE book's per-client budget.
	Ratio float64
	// Window is the sliding window the ratio is measured over, with a
	// resolution of one tenth of it; 0 means 10 s.
	Window time.Duration
	// MinPerSecond is a floor of retries per second always allowed, so that
	// a host with little traffic can still retry; 0 means 1. A negative
	// value means no floor.
	MinPerSecond float64
}

// ratioSlots is the number of buckets the window is divided into. One more
// is kept: the oldest, partly inside the window, whose counts fade out as
// the current slot fills, so the allowance is released smoothly rather than
// a slot's worth at a time.
const ratioSlots = 10

// RatioBudget allows a retry while retries in the sliding window stay below
// Ratio × requests in it, or below the MinPerSecond floor. Under sustained
// total failure, attempts per request settle at about 1 + Ratio. It is safe
// for concurrent use and lock-free; counts at a slot boundary are
// approximate by a few requests.
type RatioBudget struct {
	ratio, floor float64
	slot         time.Duration
	slots        [ratioSlots + 1]ratioSlot
}

type ratioSlot struct {
	epoch   atomic.Int64 // which slot-length interval since the Unix epoch the counts belong to
	reqs    atomic.Int64
	retries atomic.Int64
}

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
		floor: floor * window.Seconds(),
		slot:  max(window/ratioSlots, time.Nanosecond),
	}
}

func (b *RatioBudget) current(now time.Time) *ratioSlot {
	e := now.UnixNano() / int64(b.slot)
	s := &b.slots[e%(ratioSlots+1)]
	if old := s.epoch.Load(); old != e && s.epoch.CompareAndSwap(old, e) {
		s.reqs.Store(0)
		s.retries.Store(0)
	}
	return s
}

// Begin counts a request.
func (b *RatioBudget) Begin(now time.Time) { b.current(now).reqs.Add(1) }

// AllowRetry counts and allows a retry if the window has room for it.
func (b *RatioBudget) AllowRetry(now time.Time, _ bool) bool {
	cur := b.current(now)
	ns := now.UnixNano()
	e := ns / int64(b.slot)
	// The window is the last ratioSlots slots: the current one, partly
	// elapsed, the full ones before it, and the part of the oldest that the
	// current one has not yet replaced.
	fade := 1 - float64(ns%int64(b.slot))/float64(b.slot)
	var reqs, retries float64
	for i := range b.slots {
		s := &b.slots[i]
		w := 1.0
		switch ep := s.epoch.Load(); {
		case ep == e-ratioSlots:
			w = fade
		case ep <= e-ratioSlots || ep > e:
			continue
		}
		reqs += w * float64(s.reqs.Load())
		retries += w * float64(s.retries.Load())
	}
	if retries >= max(b.ratio*reqs, b.floor) {
		return false
	}
	cur.retries.Add(1)
	return true
}

// Succeeded does nothing: the ratio counts requests, not outcomes.
func (b *RatioBudget) Succeeded(time.Time, bool, bool) {}

// String describes the budget's state, as logged with each attempt.
func (b *RatioBudget) String() string {
	return fmt.Sprintf("ratio %.2f", b.ratio)
}

// budget returns the retry budget of u's host under p, creating it on
// first use.
func (t *Transport) budget(p *policy, u *url.URL) Budget {
	key := hostKey(u)
	if b, ok := t.budgets.Load(key); ok {
		return budgetOf(b)
	}
	b, _ := t.budgets.LoadOrStore(key, p.newBudget())
	return budgetOf(b)
}

// hostKey names u's host for per-host state: lower-case "host:port", with
// the scheme's default port left off, so that https://h and https://h:443
// share their state.
func hostKey(u *url.URL) string {
	key := strings.ToLower(u.Host)
	if i := strings.LastIndexByte(key, ':'); i > 0 && !strings.HasSuffix(key, "]") && key[i+1:] == defaultPort(u.Scheme) {
		key = key[:i]
	}
	return key
}

func budgetOf(v any) Budget {
	b, _ := v.(Budget)
	return b
}
