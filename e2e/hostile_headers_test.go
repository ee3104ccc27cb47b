package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// retried checks a case that the server fails once: the retry must come
// at once (the hostile hint ignored, or asking for no wait) and succeed.
func retried(source string) func(t *testing.T, o *hostileOutcome) {
	return func(t *testing.T, o *hostileOutcome) {
		o.requireStatus(t, 200, 2, httpretry.StopSuccess)
		if first := o.recs[0]; first.delay > 100*time.Millisecond || first.source != source {
			t.Errorf("waited %v from %q: want at most 100ms from %q", first.delay, first.source, source)
		}
	}
}

// returnedAtOnce checks a case whose server asks for too long a wait: its
// 503 comes back to the caller at once, untouched.
func returnedAtOnce(t *testing.T, o *hostileOutcome) {
	o.requireStatus(t, 503, 1, httpretry.StopRetryAfter)
	if o.body != "unavailable\n" || o.elapsed > time.Second {
		t.Errorf("body %q after %v: want the server's body, at once", o.body, o.elapsed)
	}
}

func first(params url.Values) func(context.Context, *hostileServer, string) *http.Request {
	return get("/first?" + params.Encode())
}

// zeroPolicy waits nothing between attempts, so that a server-requested
// wait of 0 wins over the backoff and shows as parsed: Delay source
// "retry-after" or "ratelimit" means the header was read, "backoff" that
// it was ignored.
var zeroPolicy = httpretry.Policy{MaxAttempts: 3, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}

func TestHostileHeaders(t *testing.T) {
	past := time.Now().Add(-time.Hour).UTC()
	future := time.Now().Add(2 * time.Hour).UTC()
	const rfc850 = "Monday, 02-Jan-06 15:04:05 GMT"
	runHostile(t, "Hostile headers", []hostileCase{
		{name: "Retry-After 0: obeyed", policy: zeroPolicy,
			req: first(url.Values{"ra": {"0"}}), want: retried("retry-after")},
		{name: "Retry-After, IMF-fixdate in the past: now", policy: zeroPolicy,
			req: first(url.Values{"ra": {past.Format(http.TimeFormat)}}), want: retried("retry-after")},
		{name: "Retry-After, RFC 850 date in the past: now", policy: zeroPolicy,
			req: first(url.Values{"ra": {past.Format(rfc850)}}), want: retried("retry-after")},
		{name: "Retry-After, asctime date in the past: now", policy: zeroPolicy,
			req: first(url.Values{"ra": {past.Format(time.ANSIC)}}), want: retried("retry-after")},
		{name: "Retry-After, IMF-fixdate two hours ahead: above MaxRetryAfter", policy: fastPolicy,
			req: first(url.Values{"ra": {future.Format(http.TimeFormat)}}), want: returnedAtOnce},
		{name: "Retry-After, RFC 850 date two hours ahead: above MaxRetryAfter", policy: fastPolicy,
			req: first(url.Values{"ra": {future.Format(rfc850)}}), want: returnedAtOnce},
		{name: "Retry-After, asctime date two hours ahead: above MaxRetryAfter", policy: fastPolicy,
			req: first(url.Values{"ra": {future.Format(time.ANSIC)}}), want: returnedAtOnce},
		{name: "Retry-After 86400: above MaxRetryAfter", policy: fastPolicy,
			req: first(url.Values{"ra": {"86400"}}), want: returnedAtOnce},
		{name: "Retry-After -1: ignored", policy: zeroPolicy,
			req: first(url.Values{"ra": {"-1"}}), want: retried("backoff")},
		{name: "Retry-After 1.5: ignored", policy: zeroPolicy,
			req: first(url.Values{"ra": {"1.5"}}), want: retried("backoff")},
		{name: "Retry-After garbage: ignored", policy: zeroPolicy,
			req: first(url.Values{"ra": {"soon, I promise"}}), want: retried("backoff")},
		{name: "Retry-After overflowing int64: ignored", policy: zeroPolicy,
			req: first(url.Values{"ra": {"99999999999999999999999"}}), want: retried("backoff")},
		{name: "Retry-After duplicated (0 and 3600): ignored", policy: zeroPolicy,
			req: first(url.Values{"ra": {"0", "3600"}}), want: retried("backoff")},
		{name: "Retry-After of 64 KiB of digits: ignored", policy: zeroPolicy,
			req: first(url.Values{"ralen": {strconv.Itoa(64 << 10)}}), want: retried("backoff")},
		{name: "response header of 11 MiB, past net/http's 10 MiB limit: an error, retried", policy: fastPolicy,
			req: first(url.Values{"big": {strconv.Itoa(11 << 20)}}),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireStatus(t, 200, 2, httpretry.StopSuccess)
				if o.recs[0].err == nil {
					t.Errorf("first attempt: status %d, want net/http's header-size error", o.recs[0].status)
				}
			}},
		{name: "RateLimit t=0: obeyed", policy: zeroPolicy,
			req: first(url.Values{"rl": {`"default";r=0;t=0`}}), want: retried("ratelimit")},
		{name: "RateLimit garbage: ignored", policy: zeroPolicy,
			req:  first(url.Values{"rl": {`"default";r=zero;t=soon`, `;;;=,,=;`, `"x";t=-5`}}),
			want: retried("backoff")},
		{name: "RateLimit with a reset overflowing: ignored", policy: zeroPolicy,
			req: first(url.Values{"rl": {`"default";r=0;t=99999999999999999999`}}), want: retried("backoff")},
		{name: "RateLimit asking for 30 days: above MaxRetryAfter", policy: fastPolicy,
			req: first(url.Values{"rl": {`"default";r=0;t=2592000`}}), want: returnedAtOnce},
		{name: "RateLimit with quota left (r=5): no wait from it", policy: zeroPolicy,
			req: first(url.Values{"rl": {`"default";r=5;t=3600`}}), want: retried("backoff")},
		{name: "Retry-After 0 beside RateLimit t=3600: Retry-After wins", policy: zeroPolicy,
			req: first(url.Values{"ra": {"0"}, "rl": {`"default";r=0;t=3600`}}), want: retried("retry-after")},
	})
}
