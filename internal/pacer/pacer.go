// Package pacer paces the attempts sent to one host by the rate limit the
// host announces in its answers.
package pacer

import (
	"github.com/seedhq/httpretry/internal/headers"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Hints says how a host announces its rate limit, besides Retry-After on a
// 429: the RateLimit field unless IgnoreRateLimit, and RemainingHeader with
// ResetHeader (canonical names), read as headers.Reset reads it.
type Hints struct {
	IgnoreRateLimit bool
	RemainingHeader string
	ResetHeader     string
}

// Pacer paces the attempts sent to one host by the rate limit the host
// announced, so that they wait for the reset instead of collecting 429s,
// as go-github refuses a call it knows the limit would refuse. It learns
// the limit from answers:
//
//   - a 429 with Retry-After: spent until then;
//   - a RateLimit field (draft-ietf-httpapi-ratelimit-headers): r requests
//     left for its t seconds, those of the item with the fewest left;
//   - HintPolicy.RemainingHeader with ResetHeader (X-RateLimit-Remaining
//     and X-RateLimit-Reset, as GitHub sends them): that many requests
//     left until the reset.
//
// Until the reset it admits an attempt only while fewer than the remaining
// requests are in flight; with none left, the attempt is told how long to
// wait. Answers racing each other cannot raise the count within a window,
// only a later window can. After the reset the host is unknown again and
// every attempt is admitted.
//
// A window that the host announces with a reset at most a second away
// (Retry-After: 1, the shortest wait delay-seconds can say, or a RateLimit
// t of 1) is not a window while the host accepts requests: a token-bucket
// quota says it when its next token is 10 ms away. Holding every attempt
// for that second and releasing them together collapsed goodput to a
// tenth of the quota. Such an answer is a rate signal instead: the pacer
// sends at a rate, a GCRA limiter it engages at the host's first throttle
// (or from the start, at a rate the policy declares), cut to 90 % of the
// rate the host accepted over the last second when it throttles (once a
// second at most), and raised by 5 % a second while attempts wait for it
// and the host does not throttle (by half, up to 90 % of what the host
// accepted at its last throttle, when it is far below), as the AWS SDKs'
// adaptive retry mode
// adjusts its sending rate instead of stopping and starting. A longer
// announcement, or one while nothing was accepted, is a window, as above;
// the attempts held by it are released at the rate once it ends, not all
// at once. The learnt rate is dropped after 30 s without a throttle or an
// attempt that waited for it.
//
// A nil *pacer admits everything. It is safe for concurrent use; admission
// is lock-free and allocates nothing.
type Pacer struct {
	mu        sync.Mutex   // serialises updates
	until     atomic.Int64 // UnixNano of the announced reset; math.MinInt64 for none
	remaining atomic.Int64 // requests left before until; −1 for unknown
	inflight  atomic.Int64 // attempts admitted and not yet done
	probed    atomic.Int64 // UnixNano of the pause's start or its last probe
	refused   atomic.Uint64

	// The rate, a GCRA limiter: an attempt may go at the theoretical
	// arrival time tat less tolerance; each moves tat on by interval.
	interval  atomic.Int64 // nanoseconds per attempt; 0: the rate is not limited
	tolerance atomic.Int64 // nanoseconds: the burst, less one attempt
	tat       atomic.Int64 // UnixNano
	waited    atomic.Bool  // an attempt waited for the rate since the last raise

	// Guarded by mu.
	declared     float64 // the rate the policy declares, per second; 0: none
	burst        int     // the declared burst
	accepts      meter   // answers the host accepted, over the last second
	throttles    meter   // answers the host throttled (429), over the last second
	lastCut      int64   // UnixNano of the last cut of the rate
	lastThrottle int64   // ... of the last throttle
	lastRaise    int64   // ... of its last raise
	lastBusy     int64   // ... of the last throttle or raise: the rate is dropped 30 s after it
	lastMax      float64 // the rate the host accepted when it last throttled: raises approach it fast, then probe past it slowly
}

// New returns a pacer that learns the host's rate limit from its answers.
func New() *Pacer { return NewDeclared(0, 0) }

// NewDeclared returns a pacer that sends at most rate attempts a second
// (0: no declared rate), burst at once, and learns the rest from the
// host's answers, as New's does.
func NewDeclared(rate float64, burst int) *Pacer {
	p := &Pacer{declared: rate, burst: max(burst, 1)}
	p.until.Store(math.MinInt64)
	p.remaining.Store(-1)
	if rate > 0 {
		p.setRate(rate, p.burst)
	}
	return p
}

// Rate tuning (see the Pacer's doc).
const (
	shortWindow   = time.Second      // an announced reset at most this far is a rate signal while requests are accepted
	minAccepts    = 4                // ... that is, at least this many in the last second
	cutFactor     = 0.9              // a throttle cuts the rate to this share of what was accepted
	raiseFactor   = 1.05             // a second of waits without a throttle raises it by this
	recoverFactor = 1.5              // ... or by this, up to cutFactor of what the host took at its last throttle
	dropAfter     = 30 * time.Second // the learnt rate is dropped after this without a throttle or a wait
	burstSpan     = 50 * time.Millisecond
)

// setRate makes the limiter send rate attempts a second, burst at once.
// p.mu is held.
func (p *Pacer) setRate(rate float64, burst int) {
	iv := int64(float64(time.Second) / rate)
	p.interval.Store(max(iv, 1))
	p.tolerance.Store(int64(max(burst, 1)-1) * iv)
}

// rate is the limiter's rate per second, 0 when it limits nothing.
func (p *Pacer) rate() float64 {
	if iv := p.interval.Load(); iv > 0 {
		return float64(time.Second) / float64(iv)
	}
	return 0
}

// Admit decides on an attempt at now. It returns 0 and true when the
// attempt may be sent (pair it with done); the wait until the reset and
// true when the caller should wait that long and ask again; and the wait
// and false when the wait exceeds maxWait, which counts as a refusal.
// Once a paceProbeEvery, an attempt that would be refused is let through
// instead, as the pause's probe (probe true): its answer says whether the
// pause still holds, as a half-open breaker's trial does. With the rate
// limited, an attempt the window admits takes its turn: ticket reports
// that it holds one, to be sent after the wait, without asking again
// (pair it with done either way).
func (p *Pacer) Admit(now time.Time, maxWait, maxTurn time.Duration) (wait time.Duration, ok, probe, ticket bool) {
	if p == nil {
		return 0, true, false, false
	}
	ns := now.UnixNano()
	until := p.until.Load()
	left := p.remaining.Load()
	if ns >= until || left < 0 {
		p.inflight.Add(1)
		return p.turn(ns, maxTurn, false)
	}
	for {
		n := p.inflight.Load()
		if n >= left {
			break
		}
		if p.inflight.CompareAndSwap(n, n+1) {
			return p.turn(ns, maxTurn, false)
		}
	}
	wait = time.Duration(until - ns)
	if wait <= maxWait {
		return wait, true, false, false
	}
	if last := p.probed.Load(); ns-last >= int64(ProbeEvery) && p.probed.CompareAndSwap(last, ns) {
		p.inflight.Add(1)
		return 0, true, true, false
	}
	p.refused.Add(1)
	return wait, false, false, false
}

// Refund gives back, at now, the turn at the rate that an attempt Admit
// gave a ticket did not use: the next attempt's turn comes one interval
// sooner, as if it had not been taken.
func (p *Pacer) Refund(now time.Time) {
	if p == nil {
		return
	}
	iv, ns := p.interval.Load(), now.UnixNano()
	for {
		tat := p.tat.Load()
		if iv == 0 || tat <= ns || p.tat.CompareAndSwap(tat, max(tat-iv, ns)) {
			return
		}
	}
}

// turn gives an attempt the window admitted at ns, counted in flight, its
// turn at the rate: at once without a limit, else after the wait its
// place in the rate's schedule asks, or a refusal (uncounted in flight)
// when that is past maxWait.
func (p *Pacer) turn(ns int64, maxWait time.Duration, probe bool) (time.Duration, bool, bool, bool) {
	for {
		iv := p.interval.Load()
		if iv == 0 {
			return 0, true, probe, false
		}
		tat := p.tat.Load()
		t := max(tat, ns)
		wait := time.Duration(max(t-p.tolerance.Load()-ns, 0))
		if wait > maxWait {
			p.inflight.Add(-1)
			p.refused.Add(1)
			return wait, false, false, false
		}
		if p.tat.CompareAndSwap(tat, t+iv) {
			if wait > 0 {
				p.waited.Store(true)
			}
			return wait, true, probe, true
		}
	}
}

// ProbeEvery is how often a pause longer than the caller would wait
// lets one attempt through to see whether it still holds. One header that
// announces a long pause (a day, from a proxy or for one endpoint's quota)
// then costs a request a minute rather than the host.
const ProbeEvery = time.Minute

// Done ends an attempt that admit let through.
func (p *Pacer) Done() {
	if p != nil {
		p.inflight.Add(-1)
	}
}

// Observe learns the host's rate limit from resp (nil if the attempt got
// none), received at now, as h says to read it. The answer to a probe
// replaces what was known: no announcement in it ends the pause. shared
// says that the attempt took its turn at a fleet's share of the quota: a
// short window is then, however few answers the host accepted, when it
// is the only throttle of its second, a stray that holds nobody (the
// shares were off for a moment; the fleet's next report mends them);
// more throttles in the same second say the host takes less than the
// shares give, and the window holds as for any attempt. When resp spends
// the quota for a window (a cool-down), it returns the window's end,
// else zero.
func (p *Pacer) Observe(now time.Time, resp *http.Response, h *Hints, probe, shared bool) (spent time.Time) {
	if p == nil {
		return time.Time{}
	}
	d, left, ok := announced(now, resp, h)
	// Only a 429 is a throttle of the rate: a 200 that says none are
	// left got the last one, and, announced for a window, holds it.
	throttled := resp != nil && resp.StatusCode == http.StatusTooManyRequests
	if p.learn(now, resp != nil, throttled, ok && d <= shortWindow, shared) {
		return time.Time{} // a rate signal, not a window
	}
	switch {
	case ok:
		until := now.Add(min(d, MaxReset))
		p.update(now, until.UnixNano(), left, probe)
		if left == 0 {
			return until
		}
	case probe && resp != nil:
		p.update(now, math.MinInt64, -1, true)
	}
	return time.Time{}
}

// Hold holds the pacer's attempts until until, as a window with nothing
// left that another process was told (a fleet's cool-down).
func (p *Pacer) Hold(now, until time.Time) {
	if p != nil && until.After(now) {
		p.update(now, until.UnixNano(), 0, false)
	}
}

// learn feeds the rate with an answer at now (answered false: none came),
// which the host throttled or accepted, and whose announced window is at
// most shortWindow (short), for an attempt paced by a fleet's share
// (shared). It reports whether the answer is a rate signal that
// announces no window: a short one while the host accepted requests in
// the last second, or for a shared turn, the only throttle of its second.
func (p *Pacer) learn(now time.Time, answered, throttled, short, shared bool) bool {
	if !answered && !short {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if answered && !throttled {
		p.accepts.add(now)
		p.raise(now)
	}
	if throttled {
		p.throttles.add(now)
	}
	if short {
		if p.accepts.count(now) >= minAccepts {
			if throttled {
				p.cut(now)
			}
			return true
		}
		// With fewer accepted, the rate they show is no measure. At a
		// fleet's share, one 429 in a second is a stray (the shares were
		// off for a moment): it holds nobody. More say the host takes
		// less than the shares give: a window, as for any attempt.
		if shared && (!throttled || p.throttles.count(now) <= 1) {
			return true
		}
	}
	if throttled {
		p.engage(now) // the attempts the window holds are released at the rate
	}
	return false
}

// cut lowers the rate, at a throttle at now, to cutFactor of what the
// host accepted over the last second, at most once a second: the answers
// to attempts sent before the cut say nothing of the new rate. p.mu is
// held.
func (p *Pacer) cut(now time.Time) {
	ns := now.UnixNano()
	p.lastBusy, p.lastThrottle = ns, ns
	if ns-p.lastCut < int64(time.Second) {
		return
	}
	p.lastCut = ns
	r := p.accepts.rate(now)
	if cur := p.rate(); cur > 0 {
		r = min(r, cur)
	}
	p.lastMax = r
	r = max(r*cutFactor, 1)
	p.setRate(r, p.burstAt(r))
}

// engage limits the rate, at a throttle at now that holds the host for a
// window, to what the host accepted over the last second, if it accepted
// anything and the rate is not limited yet, so that the window's end
// releases its held attempts at that rate. p.mu is held.
func (p *Pacer) engage(now time.Time) {
	p.lastBusy, p.lastThrottle = now.UnixNano(), now.UnixNano()
	if p.interval.Load() != 0 {
		return
	}
	if p.accepts.count(now) >= minAccepts {
		r := p.accepts.rate(now)
		p.lastMax = r
		r *= cutFactor
		p.setRate(r, p.burstAt(r))
	}
}

// raise raises the rate by raiseFactor, at an accepted answer at now,
// once a second while attempts waited for it and no throttle came in the
// last second, up to the declared rate; without a declared rate, it drops
// the limit after dropAfter without a throttle or a wait. p.mu is held.
func (p *Pacer) raise(now time.Time) {
	cur := p.rate()
	ns := now.UnixNano()
	if cur == 0 || ns-p.lastRaise < int64(time.Second) || ns-p.lastThrottle < int64(time.Second) {
		return
	}
	p.lastRaise = ns
	if !p.waited.Swap(false) {
		if p.declared == 0 && ns-p.lastBusy >= int64(dropAfter) {
			p.interval.Store(0)
		}
		return
	}
	p.lastBusy = ns
	r := max(cur*raiseFactor, cur+1)
	if target := p.lastMax * cutFactor; cur < target {
		r = max(r, min(cur*recoverFactor, target)) // far below what the host took: back to it fast
	}
	if p.declared > 0 {
		r = min(r, p.declared)
	}
	p.setRate(r, p.burstAt(r))
}

// burstAt is the burst at rate r: the declared one, in its share of the
// declared rate, or burstSpan's worth.
func (p *Pacer) burstAt(r float64) int {
	if p.declared > 0 {
		return max(1, int(float64(p.burst)*r/p.declared))
	}
	return max(1, int(r*burstSpan.Seconds()))
}

// meter counts events over the last second, in ten slots of 100 ms.
type meter struct {
	slots [10]int
	at    int64 // the slot index (UnixNano / 100 ms) of slots' newest
	first int64 // UnixNano of the first event since the meter was last empty
}

const slot = int64(100 * time.Millisecond)

func (m *meter) roll(now time.Time) {
	i := now.UnixNano() / slot
	if i-m.at >= int64(len(m.slots)) {
		m.slots, m.first = [10]int{}, 0
	} else {
		for j := m.at + 1; j <= i; j++ {
			m.slots[j%int64(len(m.slots))] = 0
		}
	}
	m.at = max(m.at, i)
}

func (m *meter) add(now time.Time) {
	m.roll(now)
	if m.first == 0 {
		m.first = now.UnixNano()
	}
	m.slots[(now.UnixNano()/slot)%int64(len(m.slots))]++
}

// rate is the events per second over the last second, or over the time
// since the first event if that is shorter (at least 100 ms of it).
func (m *meter) rate(now time.Time) float64 {
	n := m.count(now)
	if n == 0 {
		return 0
	}
	span := min(time.Duration(now.UnixNano()-m.first), time.Second)
	return float64(n) / max(span, time.Duration(slot)).Seconds()
}

// count is the events of the last second, before now.
func (m *meter) count(now time.Time) int {
	m.roll(now)
	n := 0
	for _, v := range m.slots {
		n += v
	}
	return n
}

// MaxReset is the furthest reset an announcement is believed for; a
// later one (the RateLimit field allows 2^32 seconds) is believed as far
// as this. Probes re-check every pause longer than the caller would wait.
const MaxReset = 24 * time.Hour

// announced reads the rate limit resp announces: how long until it resets
// and how many requests are left until then.
func announced(now time.Time, resp *http.Response, h *Hints) (time.Duration, int64, bool) {
	if resp == nil {
		return 0, 0, false
	}
	limited := resp.StatusCode == http.StatusTooManyRequests
	if limited {
		if d, ok := headers.RetryAfter(resp, now); ok {
			return d, 0, true
		}
	}
	if !h.IgnoreRateLimit {
		if vs := resp.Header[headers.RateLimitField]; len(vs) > 0 {
			v := strings.Join(vs, ",")
			if d, left, ok := headers.RateLimitQuota(v); ok {
				return d, left, true
			}
			if d, ok := headers.RateLimit(v); ok && limited {
				return d, 0, true // a 429 whose items do not say what is left: nothing is
			}
		}
	}
	if h.RemainingHeader == "" || h.ResetHeader == "" {
		return 0, 0, false
	}
	rs, ts := resp.Header.Values(h.RemainingHeader), resp.Header.Values(h.ResetHeader) // canonical already: no allocation
	if len(rs) != 1 || len(ts) != 1 {
		return 0, 0, false
	}
	left, err := strconv.ParseInt(strings.TrimSpace(rs[0]), 10, 64)
	if err != nil || left < 0 {
		return 0, 0, false
	}
	d, ok := headers.Reset(ts[0], now)
	return d, left, ok
}

// update records that left requests remain until the instant until. Within
// the window already known, counts only fall and the reset only moves
// later, so an answer overtaken by a newer one cannot undo it; a reset more
// than a second past the known one starts a new window. The answer to a
// probe (replace) is newer than anything known and replaces it.
func (p *Pacer) update(now time.Time, until, left int64, replace bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldUntil, oldLeft := p.until.Load(), p.remaining.Load()
	if !replace && now.UnixNano() < oldUntil && until <= oldUntil+int64(time.Second) {
		if oldLeft >= 0 {
			left = min(left, oldLeft)
		}
		until = max(until, oldUntil)
	}
	if now.UnixNano() >= oldUntil || replace {
		p.probed.Store(now.UnixNano()) // a new pause: its first probe comes a paceProbeEvery on
	}
	// The count first: a reader that sees the new reset with the old count
	// could wait a whole window for nothing.
	p.remaining.Store(left)
	p.until.Store(until)
}

// Busy reports whether attempts it admitted are in flight.
func (p *Pacer) Busy() bool { return p != nil && p.inflight.Load() != 0 }

// AtRest reports whether the pacer admits like a fresh one: no
// announcement in force, nothing in flight, no learnt rate, and none of
// the declared rate's schedule taken ahead.
func (p *Pacer) AtRest(now time.Time) bool {
	if p == nil {
		return true
	}
	ns := now.UnixNano()
	if ns < p.until.Load() || p.inflight.Load() != 0 || p.tat.Load() > ns {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.declared > 0 || p.interval.Load() == 0
}

// pacerStats is a snapshot of one host's announced rate limit.
type Stats struct {
	Reset     time.Time // when the announced limit resets; zero when none is in force
	Remaining int64     // requests left before Reset; −1 when unknown
	InFlight  int64
	Refused   uint64  // attempts refused since the pacer was created
	Rate      float64 // the rate attempts are sent at, per second; 0 when it is not limited
}

func (p *Pacer) Snapshot(now time.Time) Stats {
	if p == nil {
		return Stats{Remaining: -1}
	}
	s := Stats{Remaining: -1, InFlight: p.inflight.Load(), Refused: p.refused.Load(), Rate: p.rate()}
	if until := p.until.Load(); now.UnixNano() < until {
		s.Reset, s.Remaining = time.Unix(0, until), p.remaining.Load()
	}
	return s
}
