package httpretry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// pacer paces the attempts sent to one host by the rate limit the host
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
type pacer struct {
	mu        sync.Mutex   // serialises updates
	until     atomic.Int64 // UnixNano of the announced reset; math.MinInt64 for none
	remaining atomic.Int64 // requests left before until; −1 for unknown
	inflight  atomic.Int64 // attempts admitted and not yet done
	refused   atomic.Uint64
}

func newPacer() *pacer {
	p := &pacer{}
	p.until.Store(math.MinInt64)
	p.remaining.Store(-1)
	return p
}

// admit decides on an attempt at now. It returns 0 and true when the
// attempt may be sent (pair it with done); the wait until the reset and
// true when the caller should wait that long and ask again; and the wait
// and false when the wait exceeds maxWait, which counts as a refusal.
func (p *pacer) admit(now time.Time, maxWait time.Duration) (time.Duration, bool) {
	if p == nil {
		return 0, true
	}
	ns := now.UnixNano()
	until := p.until.Load()
	if ns >= until {
		p.inflight.Add(1)
		return 0, true
	}
	left := p.remaining.Load()
	if left < 0 {
		p.inflight.Add(1)
		return 0, true
	}
	for {
		n := p.inflight.Load()
		if n >= left {
			break
		}
		if p.inflight.CompareAndSwap(n, n+1) {
			return 0, true
		}
	}
	wait := time.Duration(until - ns)
	if wait > maxWait {
		p.refused.Add(1)
		return wait, false
	}
	return wait, true
}

// done ends an attempt that admit let through.
func (p *pacer) done() {
	if p != nil {
		p.inflight.Add(-1)
	}
}

// observe learns the host's rate limit from resp, received at now, as h
// says to read it.
func (p *pacer) observe(now time.Time, resp *http.Response, h *HintPolicy) {
	if p == nil {
		return
	}
	if d, left, ok := announced(now, resp, h); ok && d <= maxPaceReset {
		p.update(now, now.Add(d).UnixNano(), left)
	}
}

// maxPaceReset is the furthest reset an announcement is believed for. A
// quota that resets later (a hostile or broken header: the RateLimit field
// allows 2^32 seconds) would refuse the host for good, since nothing sent
// means nothing new announced; daily quotas fit.
const maxPaceReset = 24 * time.Hour

// announced reads the rate limit resp announces: how long until it resets
// and how many requests are left until then.
func announced(now time.Time, resp *http.Response, h *HintPolicy) (time.Duration, int64, bool) {
	if resp == nil {
		return 0, 0, false
	}
	limited := resp.StatusCode == http.StatusTooManyRequests
	if limited {
		if d, ok := retryAfter(resp, now); ok {
			return d, 0, true
		}
	}
	if !h.IgnoreRateLimit {
		if vs := resp.Header[rateLimitField]; len(vs) > 0 {
			v := strings.Join(vs, ",")
			if d, left, ok := parseRateLimitQuota(v); ok {
				return d, left, true
			}
			if d, ok := parseRateLimit(v); ok && limited {
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
	d, ok := parseReset(ts[0], h.ResetFormat, now)
	return d, left, ok
}

// update records that left requests remain until the instant until. Within
// the window already known, counts only fall and the reset only moves
// later, so an answer overtaken by a newer one cannot undo it; a reset more
// than a second past the known one starts a new window.
func (p *pacer) update(now time.Time, until, left int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldUntil, oldLeft := p.until.Load(), p.remaining.Load()
	if now.UnixNano() < oldUntil && until <= oldUntil+int64(time.Second) {
		if oldLeft >= 0 {
			left = min(left, oldLeft)
		}
		until = max(until, oldUntil)
	}
	// The count first: a reader that sees the new reset with the old count
	// could wait a whole window for nothing.
	p.remaining.Store(left)
	p.until.Store(until)
}

// atRest reports whether the pacer admits like a fresh one: no
// announcement in force and nothing in flight.
func (p *pacer) atRest(now time.Time) bool {
	return p == nil || (now.UnixNano() >= p.until.Load() && p.inflight.Load() == 0)
}

// pacerStats is a snapshot of one host's announced rate limit.
type pacerStats struct {
	Reset     time.Time // when the announced limit resets; zero when none is in force
	Remaining int64     // requests left before Reset; −1 when unknown
	InFlight  int64
	Refused   uint64 // attempts refused since the pacer was created
}

func (p *pacer) snapshot(now time.Time) pacerStats {
	if p == nil {
		return pacerStats{Remaining: -1}
	}
	s := pacerStats{Remaining: -1, InFlight: p.inflight.Load(), Refused: p.refused.Load()}
	if until := p.until.Load(); now.UnixNano() < until {
		s.Reset, s.Remaining = time.Unix(0, until), p.remaining.Load()
	}
	return s
}
