package httpretry_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"Sun, 29 Nov 2026 12:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Sunday, 29-Nov-26 12:01:00 GMT", time.Minute, true},     // RFC 850
		{"Sun Nov 29 12:00:05 2026", 5 * time.Second, true},       // asctime
		{"Sun, 29 Nov 2026 11:00:00 GMT", 0, true},                // past: now
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{" 5", 0, false},
		{"5s", 0, false},
		{"+5", 0, false},
		{"123456789012345678901234567890", 0, false}, // 30 digits
		{"4294967297", 0, false},                     // overflow guard
		{"Sun, 32 Nov 2026 12:00:00 GMT", 0, false},  // garbage date
		{"tomorrow", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			got, ok := httpretry.ParseRetryAfter(tc.value, now)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-1", "1.5", "Sun, 29 Nov 2026 12:00:30 GMT", "Sun Nov 29 12:00:05 2026", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := httpretry.ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("negative delay %v for %q", d, v)
		}
		if !ok && d != 0 {
			t.Fatalf("rejected value %q returned %v", v, d)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	const b = 100 * time.Millisecond // the constant backoff under every case
	cases := []struct {
		name     string
		header   []string // Retry-After values on the first (429) response
		maxRA    time.Duration
		deadline time.Duration // 0: none
		attempts int
		minWait  time.Duration // wait before the second attempt is at least this
		maxWait  time.Duration // and at most this
	}{
		{name: "seconds are obeyed, jittered only upward", header: []string{"5"}, attempts: 2, minWait: 5 * time.Second, maxWait: 5500 * time.Millisecond},
		{name: "an HTTP date", header: []string{"DATE+10"}, attempts: 2, minWait: 10 * time.Second, maxWait: 11 * time.Second},
		{name: "a past date means now: backoff decides", header: []string{"DATE-60"}, attempts: 2, minWait: b, maxWait: b},
		{name: "zero: backoff decides", header: []string{"0"}, attempts: 2, minWait: b, maxWait: b},
		{name: "negative is ignored", header: []string{"-5"}, attempts: 2, minWait: b, maxWait: b},
		{name: "a fraction is ignored", header: []string{"1.5"}, attempts: 2, minWait: b, maxWait: b},
		{name: "30 digits are ignored", header: []string{strings.Repeat("9", 30)}, attempts: 2, minWait: b, maxWait: b},
		{name: "a garbage date is ignored", header: []string{"Mon, 99 Foo 2026 99:99:99 GMT"}, attempts: 2, minWait: b, maxWait: b},
		{name: "several headers are ignored", header: []string{"5", "7"}, attempts: 2, minWait: b, maxWait: b},
		{name: "above MaxRetryAfter returns the response", header: []string{"61"}, attempts: 1},
		{name: "a raised MaxRetryAfter obeys it", header: []string{"61"}, maxRA: 2 * time.Minute, attempts: 2, minWait: 61 * time.Second, maxWait: 68 * time.Second},
		{name: "past the deadline returns the response", header: []string{"20"}, deadline: 10 * time.Second, attempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				first := httpretrytest.Status(429)
				for _, v := range tc.header {
					if rest, ok := strings.CutPrefix(v, "DATE"); ok {
						d, _ := time.ParseDuration(rest + "s")
						v = start.Add(d).UTC().Format(http.TimeFormat)
					}
					first = first.Header("Retry-After", v)
				}
				fake := httpretrytest.NewScript(first, httpretrytest.Status(200))
				tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(b), MaxRetryAfter: tc.maxRA}}
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				resp, err := tr.RoundTrip(get(t, ctx))
				require.NoError(t, err)
				defer resp.Body.Close()
				seen := fake.Requests()
				require.Len(t, seen, tc.attempts)
				if tc.attempts == 1 {
					assert.Equal(t, 429, resp.StatusCode)
					assert.Zero(t, time.Since(start), "returned at once")
					return
				}
				wait := seen[1].Time.Sub(start)
				assert.GreaterOrEqual(t, wait, tc.minWait)
				assert.LessOrEqual(t, wait, tc.maxWait)
			})
		})
	}
}

func TestRetryAfterSpreadsClients(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		waits := map[time.Duration]bool{}
		for range 20 {
			fake := httpretrytest.NewScript(httpretrytest.RetryAfter(503, "10"), httpretrytest.Status(200))
			tr := &httpretry.Transport{Base: fake}
			start := time.Now()
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
			waits[fake.Requests()[1].Time.Sub(start)] = true
		}
		assert.Greater(t, len(waits), 10, "clients told the same value come back at different times")
	})
}
