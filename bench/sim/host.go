package sim

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// HostConfig describes a simulated HTTP host: an http.RoundTripper that
// answers on the clock of the testing/synctest bubble it runs in, so that
// the real httpretry.Transport can be put in front of it and a minute of
// overload takes a second.
type HostConfig struct {
	// Capacity is μ, requests served per second by one FIFO queue. The
	// host cannot tell an abandoned request from a live one, so it serves
	// every request that reaches it, as in Bronson et al.'s example. 0
	// means no queue: every request takes Service, in parallel.
	Capacity float64
	// Service is each request's service time when Capacity is 0.
	Service time.Duration
	// OneWay is the network delay of each message.
	OneWay time.Duration
	// During the blip [BlipStart, BlipEnd) the network holds every packet
	// and delivers it when the blip clears. BlipEnd 0 means no blip.
	BlipStart, BlipEnd time.Duration
	// QueueLimit, if positive, sheds load: a request that finds more than
	// this much work queued ahead of it is answered 503 at once, at no cost.
	QueueLimit time.Duration
	// Quota, if positive, is a fixed-window rate limit: Quota requests per
	// QuotaWindow, windows aligned on time 0. Requests over it are answered
	// 429 at once, with Retry-After: the seconds until the window resets,
	// rounded up. Every answer carries QuotaHeaders.
	Quota       int
	QuotaWindow time.Duration
	Headers     QuotaHeaders
	// BucketRate, if positive, is a token-bucket rate limit, as most
	// APIs keep one per account: BucketRate requests per second, up to
	// BucketBurst at once. Requests over it are answered 429 at once with
	// Retry-After: the seconds until the next token, rounded up (so 1
	// while a token comes every 10 ms); with RateLimitField, every answer
	// carries the draft's field as such an upstream sends it: r the tokens
	// left, t the seconds until the bucket is full, rounded up.
	BucketRate  float64
	BucketBurst int
	// Fail and Stall, with Capacity 0, make a share of requests fail
	// whatever the load: Fail are answered 503 after Service, Stall are
	// answered 200 after StallFor instead. Seed seeds the draws.
	Fail, Stall float64
	StallFor    time.Duration
	Seed        uint64
}

// QuotaHeaders says how a quota host announces its limit.
type QuotaHeaders int

const (
	// LegacyHeaders: X-RateLimit-Remaining and X-RateLimit-Reset in
	// seconds from now, rounded up.
	LegacyHeaders QuotaHeaders = iota
	// RateLimitField: the IETF draft's RateLimit: "default";r=…;t=….
	RateLimitField
	// RetryAfterOnly: nothing but the 429's Retry-After.
	RetryAfterOnly
)

// Host is a simulated host. Create it with NewHost inside a synctest
// bubble; its time 0 is the moment it is created. It is safe for
// concurrent use.
type Host struct {
	c     HostConfig
	start time.Time
	svc   time.Duration
	r     *rand.Rand // for Fail and Stall, guarded by mu

	mu       sync.Mutex
	busy     time.Duration // when the queue's work so far is done
	window   int64         // the quota window the count belongs to
	used     int           // requests admitted in that window
	tokens   float64       // the bucket's tokens at filled
	filled   time.Duration // when tokens was counted
	arrivals []int         // requests that reached the host, per second
	tooMany  []int         // 429s sent, per second
	shed     []int         // 503s sent, per second
	backlog  float64       // requests queued when the blip's held packets arrived
}

// NewHost returns a host whose clock starts now.
func NewHost(c HostConfig) *Host {
	h := &Host{c: c, start: time.Now(), svc: c.Service, r: Stream(c.Seed, -1)}
	if c.Capacity > 0 {
		h.svc = time.Duration(float64(time.Second) / c.Capacity)
	}
	return h
}

// deliver returns when a message sent at t arrives.
func (h *Host) deliver(t time.Duration) time.Duration {
	if t >= h.c.BlipStart && t < h.c.BlipEnd {
		t = h.c.BlipEnd
	}
	return t + h.c.OneWay
}

// RoundTrip sends req to the host and waits for its answer or for the
// request's context to end. The host does its work either way.
func (h *Host) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	at := h.deliver(time.Since(h.start))
	header := http.Header{}
	status := http.StatusOK

	h.mu.Lock()
	h.arrivals = bump(h.arrivals, at)
	done := at
	switch {
	case h.c.Quota > 0 && !h.admitQuota(at, header),
		h.c.BucketRate > 0 && !h.admitBucket(at, header):
		status = http.StatusTooManyRequests
		h.tooMany = bump(h.tooMany, at)
	case h.c.Capacity > 0 && h.c.QueueLimit > 0 && h.busy-at > h.c.QueueLimit:
		status = http.StatusServiceUnavailable
		h.shed = bump(h.shed, at)
	case h.c.Capacity > 0:
		h.busy = max(h.busy, at) + h.svc
		done = h.busy
		if h.c.BlipEnd > 0 && at == h.c.BlipEnd+h.c.OneWay {
			h.backlog = max(h.backlog, float64(h.busy-at)/float64(h.svc))
		}
	default:
		done = at + h.svc
		switch u := h.r.Float64(); {
		case u < h.c.Fail:
			status = http.StatusServiceUnavailable
		case u < h.c.Fail+h.c.Stall:
			done = at + h.c.StallFor
		}
	}
	h.mu.Unlock()

	timer := time.NewTimer(time.Until(h.start.Add(h.deliver(done))))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: http.NoBody, Request: req,
	}, nil
}

// admitQuota counts a request arriving at at against the quota and writes
// the announcement headers. It reports whether the request is within the
// quota. h.mu is held.
func (h *Host) admitQuota(at time.Duration, header http.Header) bool {
	w := int64(at / h.c.QuotaWindow)
	if w != h.window {
		h.window, h.used = w, 0
	}
	ok := h.used < h.c.Quota
	if ok {
		h.used++
	}
	reset := strconv.Itoa(int(math.Ceil((time.Duration(w+1)*h.c.QuotaWindow - at).Seconds())))
	left := strconv.Itoa(h.c.Quota - h.used)
	if !ok {
		header.Set("Retry-After", reset)
	}
	switch h.c.Headers {
	case LegacyHeaders:
		header.Set("X-RateLimit-Remaining", left)
		header.Set("X-RateLimit-Reset", reset)
	case RateLimitField:
		header.Set("RateLimit", `"default";r=`+left+`;t=`+reset)
	}
	return ok
}

// admitBucket takes a token of the bucket for a request arriving at at
// and writes the announcement headers. It reports whether there was one.
// h.mu is held.
func (h *Host) admitBucket(at time.Duration, header http.Header) bool {
	burst := float64(max(h.c.BucketBurst, 1))
	if h.filled == 0 && h.tokens == 0 {
		h.tokens = burst
	}
	h.tokens = min(burst, h.tokens+(at-h.filled).Seconds()*h.c.BucketRate)
	h.filled = at
	ok := h.tokens >= 1
	if ok {
		h.tokens--
	}
	if !ok {
		next := (1 - h.tokens) / h.c.BucketRate
		header.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(next)))))
	}
	if h.c.Headers == RateLimitField {
		full := (burst - h.tokens) / h.c.BucketRate
		header.Set("RateLimit", `"default";r=`+strconv.Itoa(int(h.tokens))+`;t=`+strconv.Itoa(int(math.Ceil(full))))
	}
	return ok
}

// HostCounts is what a host saw, per second of its clock.
type HostCounts struct {
	Arrivals []int   // requests that reached it: its load
	TooMany  []int   // 429s it sent
	Shed     []int   // 503s it sent
	Backlog  float64 // requests queued when the blip's held packets arrived
}

// Counts returns a copy of the host's counters.
func (h *Host) Counts() HostCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HostCounts{
		Arrivals: append([]int(nil), h.arrivals...),
		TooMany:  append([]int(nil), h.tooMany...),
		Shed:     append([]int(nil), h.shed...),
		Backlog:  h.backlog,
	}
}

// bump counts one event at t in a per-second series.
func bump(s []int, t time.Duration) []int {
	i := int(t / time.Second)
	for len(s) <= i {
		s = append(s, 0)
	}
	s[i]++
	return s
}

// Sum returns the total of a per-second series.
func Sum(s []int) int {
	n := 0
	for _, v := range s {
		n += v
	}
	return n
}
