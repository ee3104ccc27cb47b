package headers

import (
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{`"default";r=0;t=30`, 30 * time.Second, true},
		{`"default";r=5;t=30`, 0, false}, // quota left: no reason to wait
		{`"default";t=7`, 7 * time.Second, true},
		{`"a";r=0;t=5, "b";r=0;t=60`, time.Minute, true}, // the longest exhausted quota
		{`"a";r=0;t=5, "b";r=9;t=60`, 5 * time.Second, true},
		{`"default";r=0;t=-3`, 0, false},
		{`"default";r=0;t=1.5`, 0, false},
		{`"default";r=0;t=99999999999999999999`, 0, false},
		{`garbage`, 0, false},
		{``, 0, false},
		{`;;;=,,=;t=`, 0, false},
	}
	for _, tc := range cases {
		got, ok := RateLimit(tc.v)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RateLimit(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// TestParseRateLimitQuota: the pacer reads the item with the fewest
// requests left, and skips items that do not say.
func TestParseRateLimitQuota(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v         string
		reset     time.Duration
		remaining int64
		ok        bool
	}{
		{`"default";r=0;t=30`, 30 * time.Second, 0, true},
		{`"default";r=5;t=30`, 30 * time.Second, 5, true},
		{`"default";t=7`, 0, 0, false}, // no r: nothing known about what is left
		{`"a";r=9;t=5, "b";r=2;t=60`, time.Minute, 2, true},
		{`"a";r=2;t=5, "b";r=2;t=60`, time.Minute, 2, true}, // equals: the longer wait
		{`"a";r=0;t=5, "b";t=60`, 5 * time.Second, 0, true},
		{`"default";r=3`, 0, 0, false},
		{`"default";r=-1;t=5`, 0, 0, false},
		{`garbage`, 0, 0, false},
	}
	for _, tc := range cases {
		reset, remaining, ok := RateLimitQuota(tc.v)
		if reset != tc.reset || remaining != tc.remaining || ok != tc.ok {
			t.Errorf("RateLimitQuota(%q) = %v, %d, %v; want %v, %d, %v", tc.v, reset, remaining, ok, tc.reset, tc.remaining, tc.ok)
		}
	}
}

func TestParseReset(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true},
		{"0", 0, true},
		{"99999999", 99999999 * time.Second, true}, // the longest wait: 3 years, which MaxRetryAfter refuses
		{"100000000", 0, true},                     // the earliest Unix time: long past, so now
		{"1800000045", 45 * time.Second, true},
		{"1700000000", 0, true},   // in the past: now
		{"99999999999", 0, false}, // a time over 2^32 s away: hostile
		{"-1", 0, false},
		{"soon", 0, false},
	}
	for _, tc := range cases {
		got, ok := Reset(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Reset(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"default";r=0;t=30`, `"a";r=0;t=5, "b";r=0;t=60`, `;;=`, `t=9223372036854775807`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := RateLimit(v)
		if d < 0 || d > maxSeconds*time.Second || (!ok && d != 0) {
			t.Fatalf("RateLimit(%q) = %v, %v", v, d, ok)
		}
		reset, left, ok := RateLimitQuota(v)
		if reset < 0 || reset > maxSeconds*time.Second || left < 0 || (!ok && (reset != 0 || left != 0)) {
			t.Fatalf("RateLimitQuota(%q) = %v, %d, %v", v, reset, left, ok)
		}
	})
}

func FuzzParseReset(f *testing.F) {
	for _, s := range []string{"30", "1800000045", "-1", "9223372036854775807", " 7 "} {
		f.Add(s)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := Reset(v, now)
		if d < 0 || d > maxSeconds*time.Second || (!ok && d != 0) {
			t.Fatalf("Reset(%q) = %v, %v", v, d, ok)
		}
	})
}
