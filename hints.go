package httpretry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HintPolicy configures the server hints a Transport reads from responses,
// beyond Retry-After. In Hosts and WithPolicy, a zero HintPolicy inherits
// and a non-zero one replaces the inherited one as a whole.
//
// Precedence. Whether to retry: Policy.Classify, then the should-retry
// header, then the built-in classification. When to retry: Retry-After,
// then the rate-limit hints (RateLimit, then ResetHeader), then the backoff
// strategy. Retry-After comes first because the RateLimit draft says so when
// both are present. A server-requested wait, whatever its source, is never
// shortened, is jittered only upward, and ends retrying when it exceeds
// MaxRetryAfter or the context's deadline.
type HintPolicy struct {
	// ShouldRetryHeader names a response header whose value "true" or
	// "false" overrides the classification of a failed response (a status
	// of 400 or more; on a success it is ignored), as Stripe's
	// Stripe-Should-Retry does. "true" means the server vouches that sending
	// the request again is safe, whatever its method; "false" means do not
	// retry. Other values are ignored. "" means no such header.
	ShouldRetryHeader string

	// IgnoreRateLimit turns off reading the wait from the RateLimit header
	// field of the IETF draft (RateLimit: "default";r=0;t=30: t seconds
	// until the quota resets) on responses that are retried anyway.
	IgnoreRateLimit bool

	// ResetHeader names a legacy header that says when a rate limit resets,
	// such as X-RateLimit-Reset, read on responses that are retried anyway.
	// Its meaning differs between APIs, so ResetFormat must say which it is.
	// "" means none.
	ResetHeader string

	// ResetFormat says how ResetHeader counts. The zero value is
	// ResetDeltaSeconds.
	ResetFormat ResetFormat

	// RemainingHeader names a legacy header that counts the requests left
	// before ResetHeader's reset, such as X-RateLimit-Remaining (GitHub,
	// Stripe). It is read with ResetHeader, which must be set too, and only
	// to pace requests (OverloadPolicy.Pace): while a response carrying
	// both says requests are left, attempts go out as long as fewer than
	// that many are in flight; once it says none are, they wait for the
	// reset (see docs/overload.md). "" means none.
	RemainingHeader string
}

// rateLimitField is the RateLimit header field's name in canonical form,
// so that looking it up on every response does not allocate.
const rateLimitField = "Ratelimit"

// ResetFormat is the unit of a rate-limit reset header.
type ResetFormat int

const (
	// ResetDeltaSeconds: seconds from now until the reset.
	ResetDeltaSeconds ResetFormat = iota
	// ResetEpochSeconds: the reset instant as Unix time in seconds (GitHub).
	ResetEpochSeconds
)

// shouldRetry reads the should-retry header of a failure (a status of 400
// or more): ClassNotProcessed for "true", ClassFatal for "false",
// ClassDefault otherwise. On a success it says nothing: a request the
// server carried out is never sent again on its word.
func (h *HintPolicy) shouldRetry(resp *http.Response) Class {
	if h.ShouldRetryHeader == "" || resp == nil || resp.StatusCode < 400 {
		return ClassDefault
	}
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get(h.ShouldRetryHeader))) {
	case "true":
		return ClassNotProcessed
	case "false":
		return ClassFatal
	}
	return ClassDefault
}

// serverDelay returns the wait the response asks for and where it comes
// from, following the precedence documented on HintPolicy.
func (h *HintPolicy) serverDelay(resp *http.Response, now time.Time) (time.Duration, DelaySource, bool) {
	if resp == nil {
		return 0, DelayNone, false
	}
	if d, ok := retryAfter(resp, now); ok {
		return d, DelayRetryAfter, true
	}
	if !h.IgnoreRateLimit {
		if vs := resp.Header.Values("RateLimit"); len(vs) > 0 {
			if d, ok := parseRateLimit(strings.Join(vs, ",")); ok {
				return d, DelayRateLimit, true
			}
		}
	}
	if h.ResetHeader != "" {
		if vs := resp.Header.Values(h.ResetHeader); len(vs) == 1 {
			if d, ok := parseReset(vs[0], h.ResetFormat, now); ok {
				return d, DelayResetHeader, true
			}
		}
	}
	return 0, DelayNone, false
}

// parseRateLimit reads the wait from a RateLimit field value
// (draft-ietf-httpapi-ratelimit-headers): a list of quota items, each with
// parameters r (remaining) and t (seconds until reset). The wait is the
// longest t among exhausted items (r=0, or r absent). Malformed items are
// skipped; no usable item means no hint.
func parseRateLimit(v string) (time.Duration, bool) {
	var (
		best  time.Duration
		found bool
	)
	rateLimitItems(v, func(r, t int64) {
		if r > 0 {
			return
		}
		if d := time.Duration(t) * time.Second; !found || d > best {
			best, found = d, true
		}
	})
	return best, found
}

// parseRateLimitQuota reads the most constrained quota from a RateLimit
// field value: the item with the fewest requests remaining (r), the longest
// t among equals, and returns its r and t. Items without r are skipped:
// they do not say what is left.
func parseRateLimitQuota(v string) (reset time.Duration, remaining int64, ok bool) {
	rateLimitItems(v, func(r, t int64) {
		d := time.Duration(t) * time.Second
		if r >= 0 && (!ok || r < remaining || r == remaining && d > reset) {
			reset, remaining, ok = d, r, true
		}
	})
	return reset, remaining, ok
}

// rateLimitItems calls f with the r (−1 when absent) and t of every item
// of a RateLimit field value that has a usable t.
func rateLimitItems(v string, f func(r, t int64)) {
	for item := range strings.SplitSeq(v, ",") {
		params := strings.Split(item, ";")
		r, t := int64(-1), int64(-1)
		for _, p := range params[1:] {
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 || n > maxRetryAfterSeconds {
				continue
			}
			switch k {
			case "r":
				r = n
			case "t":
				t = n
			}
		}
		if t >= 0 {
			f(r, t)
		}
	}
}

// parseReset reads a legacy reset header as delta or epoch seconds. A reset
// in the past means now.
func parseReset(v string, f ResetFormat, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	switch f {
	case ResetDeltaSeconds:
		if n > maxRetryAfterSeconds {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	case ResetEpochSeconds:
		delta := n - now.Unix()
		if delta > maxRetryAfterSeconds {
			return 0, false
		}
		return max(time.Duration(delta)*time.Second, 0), true
	}
	return 0, false
}
