// Package throttle is client-side adaptive throttling for one host, after
// the Google SRE book's "Handling Overload" (equation 21-1).
package throttle

import (
	"github.com/seedhq/httpretry/internal/signal"
	"github.com/seedhq/httpretry/internal/window"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Config configures a throttle. Zero fields take the defaults;
// nonsense values (NaN, negative, K below 1, MaxReject above 1) are
// treated as zero.
type Config struct {
	// K is the multiplier of accepts: attempts are rejected locally once
	// requests exceed K × accepts in the window. 0 means 2, the SRE book's
	// preference; 1.1 is its aggressive setting.
	K float64
	// Window is the sliding window requests and accepts are counted over,
	// with a resolution of a tenth of it. 0 means 10 s.
	Window time.Duration
	// MaxReject caps the rejection probability, so that a host that has
	// failed everything still sees a trickle of attempts and its recovery
	// is noticed. 0 means 0.9, failsafe-go's maxRejectionRate.
	MaxReject float64
	// MinRequests is how many attempts with an outcome the window must hold
	// before anything is rejected, so that one timeout on a quiet host does
	// not shut it off for a window. 0 means 10.
	MinRequests int
}

// Counters of a throttle's window.
const (
	thAccepted   = iota // attempts the host accepted
	thOverloaded        // attempts the host turned away or did not answer in time
	thRejected          // attempts rejected locally
)

// Throttle is the client-side adaptive throttling of one host (Google SRE
// book, "Handling Overload", equation 21-1): over a sliding window it
// counts requests (attempts the host answered or failed to answer, plus
// those the throttle itself rejected) and accepts, and rejects each new attempt
// locally with probability
//
//	max(0, (requests − K·accepts) / (requests + 1)),
//
// capped at MaxReject. While more than 1/K of requests are accepted it
// rejects nothing; with K = 2 the host then sees at most about two
// attempts for each it accepts.
//
// Rejections count as requests, so a host whose failures do not depend on
// load is throttled all or nothing: once accepts fall below 1/K of the
// attempts sent, the rejection probability climbs to MaxReject and stays
// there until the failures leave the window, after which it falls by a
// factor K per window. K = 2 keeps that switch at half the attempts
// failing.
//
// A nil *throttle admits everything. It is safe for concurrent use,
// lock-free, and allocates nothing.
type Throttle struct {
	k, maxReject float64
	minRequests  float64
	span         int64 // nanoseconds a count stays in the window: its length and one slot
	w            window.Window
	lastBad      atomic.Int64  // UnixNano of the last overloaded outcome or rejection; math.MinInt64 for none
	rejected     atomic.Uint64 // attempts rejected since creation, for Stats
}

func New(c Config) *Throttle {
	k := c.K
	if !(k >= 1) || math.IsInf(k, 0) {
		k = 2
	}
	maxReject := c.MaxReject
	if !(maxReject > 0 && maxReject <= 1) {
		maxReject = 0.9
	}
	length := c.Window
	if length <= 0 {
		length = 10 * time.Second
	}
	minRequests := c.MinRequests
	if minRequests <= 0 {
		minRequests = 10
	}
	th := &Throttle{k: k, maxReject: maxReject, minRequests: float64(minRequests), w: window.New(length)}
	th.span = th.w.Span()
	th.lastBad.Store(math.MinInt64)
	return th
}

// quiet reports whether the window ending at now holds nothing but
// accepts: the admit path of a healthy host, one atomic load.
func (t *Throttle) quiet(now time.Time) bool {
	bad := t.lastBad.Load()
	return bad == math.MinInt64 || now.UnixNano()-bad > t.span
}

// Admit reports whether an attempt may be sent at now. A refusal is
// counted; an admitted attempt is counted when its outcome is recorded.
func (t *Throttle) Admit(now time.Time) bool {
	if t == nil || t.quiet(now) {
		return true
	}
	p := t.probability(now)
	if p <= 0 || rand.Float64() >= p {
		return true
	}
	t.w.Add(now, thRejected, 1)
	t.lastBad.Store(now.UnixNano())
	t.rejected.Add(1)
	return false
}

// Record counts the outcome of an admitted attempt.
func (t *Throttle) Record(now time.Time, s signal.Signal) {
	if t == nil || s == signal.None {
		return
	}
	if s == signal.Accepted {
		t.w.Add(now, thAccepted, 1)
		return
	}
	t.w.Add(now, thOverloaded, 1)
	t.lastBad.Store(now.UnixNano())
}

// probability returns the probability that an attempt at now is rejected.
func (t *Throttle) probability(now time.Time) float64 {
	n := t.w.Sums(now)
	if n[thAccepted]+n[thOverloaded] < t.minRequests {
		return 0
	}
	requests := n[thAccepted] + n[thOverloaded] + n[thRejected]
	p := (requests - t.k*n[thAccepted]) / (requests + 1)
	return min(max(p, 0), t.maxReject)
}

// AtRest reports whether the throttle admits like a fresh one and would go
// on doing so: nothing but accepts in its window. Forgetting those accepts
// only makes the next failures count sooner, as in a fresh throttle.
func (t *Throttle) AtRest(now time.Time) bool {
	if t == nil || t.quiet(now) {
		return true
	}
	return !t.w.Any(now, func(n *[window.Counters]atomic.Int64) bool {
		return n[thOverloaded].Load() != 0 || n[thRejected].Load() != 0
	})
}

// Stats is a snapshot of one host's throttle.
type Stats struct {
	Requests          float64 // in the window: attempts with an outcome plus local rejections
	Accepts           float64 // in the window
	RejectProbability float64 // for an attempt now
	Rejected          uint64  // local rejections since the throttle was created
}

func (t *Throttle) Snapshot(now time.Time) Stats {
	if t == nil {
		return Stats{}
	}
	n := t.w.Sums(now)
	return Stats{
		Requests:          n[thAccepted] + n[thOverloaded] + n[thRejected],
		Accepts:           n[thAccepted],
		RejectProbability: t.probability(now),
		Rejected:          t.rejected.Load(),
	}
}
