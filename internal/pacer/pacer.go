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
// A nil *pacer admits everything. It is safe for concurrent use; admission
// is lock-free and allocates nothing; memory is four words per host.
type Pacer struct {
	mu        sync.Mutex   // serialises updates
	until     atomic.Int64 // UnixNano of the announced reset; math.MinInt64 for none
	remaining atomic.Int64 // requests left before until; −1 for unknown
	inflight  atomic.Int64 // attempts admitted and not yet done
	probed    atomic.Int64 // UnixNano of the pause's start or its last probe
	refused   atomic.Uint64
}

func New() *Pacer {
	p := &Pacer{}
	p.until.Store(math.MinInt64)
	p.remaining.Store(-1)
	return p
}

// Admit decides on an attempt at now. It returns 0 and true when the
// attempt may be sent (pair it with done); the wait until the reset and
// true when the caller should wait that long and ask again; and the wait
// and false when the wait exceeds maxWait, which counts as a refusal.
// Once a paceProbeEvery, an attempt that would be refused is let through
// instead, as the pause's probe (probe true): its answer says whether the
// pause still holds, as a half-open breaker's trial does.
func (p *Pacer) Admit(now time.Time, maxWait time.Duration) (wait time.Duration, ok, probe bool) {
	if p == nil {
		return 0, true, false
	}
	ns := now.UnixNano()
	until := p.until.Load()
	if ns >= until {
		p.inflight.Add(1)
		return 0, true, false
	}
	left := p.remaining.Load()
	if left < 0 {
		p.inflight.Add(1)
		return 0, true, false
	}
	for {
		n := p.inflight.Load()
		if n >= left {
			break
		}
		if p.inflight.CompareAndSwap(n, n+1) {
			return 0, true, false
		}
	}
	wait = time.Duration(until - ns)
	if wait <= maxWait {
		return wait, true, false
	}
	if last := p.probed.Load(); ns-last >= int64(ProbeEvery) && p.probed.CompareAndSwap(last, ns) {
		p.inflight.Add(1)
		return 0, true, true
	}
	p.refused.Add(1)
	return wait, false, false
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
// replaces what was known: no announcement in it ends the pause.
func (p *Pacer) Observe(now time.Time, resp *http.Response, h *Hints, probe bool) {
	if p == nil {
		return
	}
	d, left, ok := announced(now, resp, h)
	switch {
	case ok:
		p.update(now, now.Add(min(d, MaxReset)).UnixNano(), left, probe)
	case probe && resp != nil:
		p.update(now, math.MinInt64, -1, true)
	}
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
// announcement in force and nothing in flight.
func (p *Pacer) AtRest(now time.Time) bool {
	return p == nil || (now.UnixNano() >= p.until.Load() && p.inflight.Load() == 0)
}

// pacerStats is a snapshot of one host's announced rate limit.
type Stats struct {
	Reset     time.Time // when the announced limit resets; zero when none is in force
	Remaining int64     // requests left before Reset; −1 when unknown
	InFlight  int64
	Refused   uint64 // attempts refused since the pacer was created
}

func (p *Pacer) Snapshot(now time.Time) Stats {
	if p == nil {
		return Stats{Remaining: -1}
	}
	s := Stats{Remaining: -1, InFlight: p.inflight.Load(), Refused: p.refused.Load()}
	if until := p.until.Load(); now.UnixNano() < until {
		s.Reset, s.Remaining = time.Unix(0, until), p.remaining.Load()
	}
	return s
}
