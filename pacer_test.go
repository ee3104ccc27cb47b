package httpretry

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

func answer(code int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: code, Header: h}
}

var githubStyle = HintPolicy{ResetHeader: "X-RateLimit-Reset", ResetFormat: ResetEpochSeconds, RemainingHeader: "X-RateLimit-Remaining"}

func TestPacerAnnouncements(t *testing.T) {
	t.Parallel()
	epoch := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).Unix(), 10) }
	cases := []struct {
		name     string
		c        HintPolicy
		resp     *http.Response
		wait     time.Duration // what the next attempt is told, with one in flight
		resetsIn time.Duration // 0: nothing in force
	}{
		{"429 with Retry-After", HintPolicy{}, answer(429, "Retry-After", "7"), 7 * time.Second, 7 * time.Second},
		{"503 with Retry-After: not a quota", HintPolicy{}, answer(503, "Retry-After", "7"), 0, 0},
		{"429 without hints", HintPolicy{}, answer(429), 0, 0},
		{"RateLimit exhausted", HintPolicy{}, answer(200, "RateLimit", `"default";r=0;t=5`), 5 * time.Second, 5 * time.Second},
		{"RateLimit ignored", HintPolicy{IgnoreRateLimit: true}, answer(200, "RateLimit", `"default";r=0;t=5`), 0, 0},
		{"RateLimit with quota left", HintPolicy{}, answer(200, "RateLimit", `"default";r=9;t=5`), 0, 5 * time.Second},
		{"RateLimit, one left, one in flight", HintPolicy{}, answer(200, "RateLimit", `"default";r=1;t=5`), 5 * time.Second, 5 * time.Second},
		{"RateLimit, the item with the fewest left", HintPolicy{}, answer(200, "RateLimit", `"a";r=1;t=5, "b";r=50;t=60`), 5 * time.Second, 5 * time.Second},
		{"RateLimit without r on a 200: says nothing", HintPolicy{}, answer(200, "RateLimit", `"default";t=5`), 0, 0},
		{"RateLimit without r on a 429: spent", HintPolicy{}, answer(429, "RateLimit", `"default";t=5`), 5 * time.Second, 5 * time.Second},
		{"remaining 0, epoch reset", githubStyle, answer(200, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(40*time.Second)), 40 * time.Second, 40 * time.Second},
		{"remaining 2, epoch reset", githubStyle, answer(200, "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", epoch(40*time.Second)), 0, 40 * time.Second},
		{"remaining 1, one in flight", githubStyle, answer(200, "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(40*time.Second)), 40 * time.Second, 40 * time.Second},
		{"remaining without a reset header configured", HintPolicy{RemainingHeader: "X-RateLimit-Remaining"}, answer(200, "X-RateLimit-Remaining", "0"), 0, 0},
		{"remaining garbage", githubStyle, answer(200, "X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", epoch(time.Minute)), 0, 0},
		{"delta reset", HintPolicy{ResetHeader: "X-RateLimit-Reset", RemainingHeader: "X-RateLimit-Remaining"},
			answer(200, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3"), 3 * time.Second, 3 * time.Second},
		{"Retry-After before RateLimit", HintPolicy{}, answer(429, "Retry-After", "2", "RateLimit", `"default";r=0;t=9`), 2 * time.Second, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer()
			if _, ok := p.admit(t0, time.Minute); !ok {
				t.Fatal("a fresh pacer refused")
			}
			p.observe(t0, tc.resp, &tc.c)
			wait, ok := p.admit(t0, time.Minute)
			if wait != tc.wait || !ok {
				t.Errorf("admit = %v, %v; want %v, true", wait, ok, tc.wait)
			}
			s := p.snapshot(t0)
			if got := s.Reset.Sub(t0); (tc.resetsIn == 0 && !s.Reset.IsZero()) || (tc.resetsIn != 0 && got != tc.resetsIn) {
				t.Errorf("snapshot %+v; want a reset in %v", s, tc.resetsIn)
			}
		})
	}
}

// TestPacerWaitsAndRefuses: a wait within the ceiling is handed back to
// the caller; one past it is a refusal, counted; once the reset has
// passed, everything goes again and the pacer is at rest.
func TestPacerWaitsAndRefuses(t *testing.T) {
	t.Parallel()
	p := newPacer()
	p.observe(t0, answer(429, "Retry-After", "30"), &HintPolicy{})
	if wait, ok := p.admit(t0.Add(10*time.Second), 25*time.Second); wait != 20*time.Second || !ok {
		t.Errorf("within the ceiling: %v, %v", wait, ok)
	}
	if wait, ok := p.admit(t0, 25*time.Second); wait != 30*time.Second || ok {
		t.Errorf("past the ceiling: %v, %v", wait, ok)
	}
	if s := p.snapshot(t0); s.Refused != 1 || s.Remaining != 0 {
		t.Errorf("snapshot %+v", s)
	}
	if p.atRest(t0.Add(29 * time.Second)) {
		t.Error("at rest before the reset")
	}
	reset := t0.Add(30 * time.Second)
	if !p.atRest(reset) {
		t.Error("not at rest at the reset")
	}
	if wait, ok := p.admit(reset, 0); wait != 0 || !ok {
		t.Errorf("at the reset: %v, %v", wait, ok)
	}
	if p.atRest(reset) {
		t.Error("at rest with an attempt in flight")
	}
	p.done()
	if !p.atRest(reset) || p.snapshot(reset).InFlight != 0 {
		t.Error("not at rest once it is done")
	}
}

// TestPacerStaleAnswers: answers overtaken by newer ones cannot raise the
// count or bring the reset forward within a window; a later window can.
func TestPacerStaleAnswers(t *testing.T) {
	t.Parallel()
	p := newPacer()
	c := HintPolicy{ResetHeader: "Reset", RemainingHeader: "Left"}
	p.observe(t0, answer(200, "Left", "0", "Reset", "10"), &c)
	p.observe(t0, answer(200, "Left", "5", "Reset", "9"), &c) // sent earlier, answered later
	if s := p.snapshot(t0); s.Remaining != 0 || s.Reset != t0.Add(10*time.Second) {
		t.Errorf("after a stale answer: %+v", s)
	}
	p.observe(t0.Add(time.Second), answer(429, "Retry-After", "30"), &c) // the server knows better
	if s := p.snapshot(t0); s.Reset != t0.Add(31*time.Second) {
		t.Errorf("a later reset: %+v", s)
	}
	next := t0.Add(31 * time.Second)
	p.observe(next, answer(200, "Left", "99", "Reset", "10"), &c) // the next window
	if s := p.snapshot(next); s.Remaining != 99 || s.Reset != next.Add(10*time.Second) {
		t.Errorf("next window: %+v", s)
	}
}

func TestPacerNil(t *testing.T) {
	t.Parallel()
	var p *pacer
	p.observe(t0, answer(429, "Retry-After", "3"), &HintPolicy{})
	p.done()
	if wait, ok := p.admit(t0, 0); wait != 0 || !ok || !p.atRest(t0) || p.snapshot(t0).Remaining != -1 {
		t.Error("a nil pacer must admit everything and be at rest")
	}
}

// TestPacerConcurrent: with 3 requests left, no more than 3 are ever in
// flight, whatever the interleaving.
func TestPacerConcurrent(t *testing.T) {
	t.Parallel()
	p := newPacer()
	c := HintPolicy{ResetHeader: "Reset", RemainingHeader: "Left"}
	p.observe(t0, answer(200, "Left", "3", "Reset", "60"), &c)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if wait, _ := p.admit(t0, time.Minute); wait == 0 {
					mu.Lock()
					peak = max(peak, p.inflight.Load())
					mu.Unlock()
					p.observe(t0, answer(200, "Left", "3", "Reset", "60"), &c)
					p.done()
				}
			}
		})
	}
	wg.Wait()
	if peak > 3 || p.inflight.Load() != 0 {
		t.Errorf("peak %d in flight, %d left over", peak, p.inflight.Load())
	}
}

// BenchmarkPacerAdmit is an attempt's cost at a host that announced a
// quota with room left: admit and done. Run with -benchmem: it allocates
// nothing.
func BenchmarkPacerAdmit(b *testing.B) {
	p := newPacer()
	p.observe(t0, answer(200, "X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", "3600"),
		&HintPolicy{ResetHeader: "X-RateLimit-Reset", RemainingHeader: "X-RateLimit-Remaining"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if wait, _ := p.admit(t0, 0); wait != 0 {
				b.Fatal("paced")
			}
			p.done()
		}
	})
}
