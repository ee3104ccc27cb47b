// Package headers parses the response headers in which servers say when
// to come back: Retry-After (RFC 9110 § 10.2.3), the RateLimit field of
// draft-ietf-httpapi-ratelimit-headers, and legacy reset headers such as
// X-RateLimit-Reset. Every parser bounds what it accepts and reports a
// malformed, negative or overflowing value as absent.
package headers

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimitField is the RateLimit header field's name in canonical form,
// so that looking it up on every response does not allocate.
const RateLimitField = "Ratelimit"

// maxSeconds bounds delay-seconds before conversion so that
// n·time.Second cannot overflow; anything larger is ignored as hostile.
const maxSeconds = 1 << 32

// ParseRetryAfter parses a Retry-After header value (RFC 9110 § 10.2.3):
// delay-seconds, or an HTTP-date in any of the three forms http.ParseTime
// accepts. A date in the past means 0. It reports false for a missing,
// negative, fractional, overflowing or otherwise malformed value, which
// callers should ignore.
//
// [RFC 9110 § 10.2.3]: https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' {
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil || n > maxSeconds {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// RetryAfter reads the response's Retry-After. Several headers, or a
// comma-joined value, are malformed and ignored.
func RetryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	vs := resp.Header.Values("Retry-After")
	if len(vs) != 1 {
		return 0, false
	}
	return ParseRetryAfter(vs[0], now)
}

// RateLimit reads the wait from a RateLimit field value
// (draft-ietf-httpapi-ratelimit-headers): a list of quota items, each with
// parameters r (remaining) and t (seconds until reset). The wait is the
// longest t among exhausted items (r=0, or r absent). Malformed items are
// skipped; no usable item means no hint.
func RateLimit(v string) (time.Duration, bool) {
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

// RateLimitQuota reads the most constrained quota from a RateLimit
// field value: the item with the fewest requests remaining (r), the longest
// t among equals, and returns its r and t. Items without r are skipped:
// they do not say what is left.
func RateLimitQuota(v string) (reset time.Duration, remaining int64, ok bool) {
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
			if err != nil || n < 0 || n > maxSeconds {
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

// EpochAfter is where a legacy reset header's value stops being seconds
// from now and starts being a Unix time: 10⁸ seconds is over 3 years as a
// wait, which no server means, and March 1973 as a time, before any server
// sent one (and before testing/synctest's clock, which starts in 2000).
// APIs use both (GitHub and X send a Unix time; others, as the IETF
// RateLimit draft, send seconds), and no value is both.
const EpochAfter = 100_000_000

// Reset reads a legacy reset header: seconds from now, or, from EpochAfter
// on, the reset's Unix time. A reset in the past means now.
func Reset(v string, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	if n < EpochAfter {
		if n > maxSeconds {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	delta := n - now.Unix()
	if delta > maxSeconds {
		return 0, false
	}
	return max(time.Duration(delta)*time.Second, 0), true
}
