package httpretry

import (
	"net/http"
	"strconv"
	"time"
)

// maxRetryAfterSeconds bounds delay-seconds before conversion so that
// n·time.Second cannot overflow; anything larger is ignored as hostile.
const maxRetryAfterSeconds = 1 << 32

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
		if err != nil || n > maxRetryAfterSeconds {
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

// retryAfter reads the response's Retry-After. Several headers, or a
// comma-joined value, are malformed and ignored.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	vs := resp.Header.Values("Retry-After")
	if len(vs) != 1 {
		return 0, false
	}
	return ParseRetryAfter(vs[0], now)
}
