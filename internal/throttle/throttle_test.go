package throttle

import (
	"github.com/seedhq/httpretry/internal/signal"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// feed records n outcomes at now, the first accepted ones accepted.
func feed(th *Throttle, now time.Time, n, accepted int) {
	for i := range n {
		s := signal.Overloaded
		if i < accepted {
			s = signal.Accepted
		}
		th.Record(now, s)
	}
}

func TestThrottleFormula(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name               string
		c                  Config
		requests, accepted int
		want               float64
	}{
		{"all accepted", Config{}, 100, 100, 0},
		{"half accepted, K = 2: the threshold", Config{}, 100, 50, 0},
		{"40 % accepted, K = 2", Config{}, 100, 40, 20.0 / 101},
		{"none accepted: capped", Config{}, 100, 0, 0.9},
		{"none accepted, cap 1", Config{MaxReject: 1}, 100, 0, 100.0 / 101},
		{"K = 1.1", Config{K: 1.1}, 100, 80, (100 - 88.0) / 101},
		{"below MinRequests", Config{}, 9, 0, 0},
		{"at MinRequests", Config{}, 10, 0, 0.9},
		{"MinRequests 1", Config{MinRequests: 1, MaxReject: 1}, 1, 0, 0.5},
		{"nonsense K is 2", Config{K: math.NaN()}, 100, 40, 20.0 / 101},
		{"K below 1 is 2", Config{K: 0.5}, 100, 40, 20.0 / 101},
		{"nonsense cap is 0.9", Config{MaxReject: 2}, 100, 0, 0.9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := New(tc.c)
			feed(th, t0, tc.requests, tc.accepted)
			if got := th.probability(t0); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("probability = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestThrottleRejectionsCount: local rejections are requests, so they
// raise the probability further, and they show in the snapshot.
func TestThrottleRejectionsCount(t *testing.T) {
	t.Parallel()
	th := New(Config{MaxReject: 1})
	feed(th, t0, 100, 40)
	p0 := th.probability(t0)
	rejected := 0
	for range 1000 {
		if !th.Admit(t0) {
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatal("nothing rejected at", p0)
	}
	s := th.Snapshot(t0)
	if s.Rejected != uint64(rejected) || s.Requests != float64(100+rejected) || s.Accepts != 40 {
		t.Errorf("snapshot %+v after %d rejections", s, rejected)
	}
	if s.RejectProbability <= p0 {
		t.Errorf("probability %v did not rise from %v", s.RejectProbability, p0)
	}
}

// TestThrottleAdmitRate checks admit against the formula: with 30 of 100
// accepted and K = 2, (100 − 60)/101 of attempts are rejected while the
// rejections themselves are not yet counted (a fresh window per draw).
func TestThrottleAdmitRate(t *testing.T) {
	t.Parallel()
	const n = 20000
	p := 40.0 / 101
	rejected := 0
	for i := range n {
		th := New(Config{})
		feed(th, t0, 100, 30)
		if !th.Admit(t0.Add(time.Duration(i))) {
			rejected++
		}
	}
	sd := math.Sqrt(n * p * (1 - p))
	if math.Abs(float64(rejected)-n*p) > 4*sd {
		t.Errorf("rejected %d of %d, want %.0f ± %.0f", rejected, n, n*p, 4*sd)
	}
}

// TestThrottleSwitch shows the all-or-nothing response to failures that do
// not depend on load: with K = 2, a host failing 40 % of attempts is never
// throttled, one failing 75 % ends at the cap. Each step sends one attempt
// if admitted, which fails with probability f.
func TestThrottleSwitch(t *testing.T) {
	t.Parallel()
	run := func(f float64) float64 {
		r := rand.New(rand.NewPCG(1, uint64(f*100)))
		th := New(Config{})
		now := t0
		for range 60000 {
			now = now.Add(time.Millisecond) // 10 000 attempts per window
			if !th.Admit(now) {
				continue
			}
			if r.Float64() < f {
				th.Record(now, signal.Overloaded)
			} else {
				th.Record(now, signal.Accepted)
			}
		}
		return th.probability(now)
	}
	if p := run(0.4); p != 0 {
		t.Errorf("40 %% failures: probability %v, want 0", p)
	}
	if p := run(0.75); p < 0.85 {
		t.Errorf("75 %% failures: probability %v, want the cap 0.9", p)
	}
}

// TestThrottleForgets: once the failures leave the window the throttle
// admits everything and is at rest, as a fresh one.
func TestThrottleForgets(t *testing.T) {
	t.Parallel()
	th := New(Config{Window: 10 * time.Second})
	feed(th, t0, 50, 0)
	th.Admit(t0) // most likely a rejection, counted too
	if th.AtRest(t0) || th.probability(t0) == 0 {
		t.Fatal("a failing host is at rest")
	}
	later := t0.Add(5 * time.Second)
	feed(th, later, 50, 50)
	if th.AtRest(later) {
		t.Error("at rest with failures in the window")
	}
	gone := t0.Add(11 * time.Second)
	if p := th.probability(gone); p != 0 {
		t.Errorf("probability %v once the failures left the window", p)
	}
	if !th.AtRest(gone) {
		t.Error("not at rest once only accepts are left")
	}
	if !New(Config{}).AtRest(t0) {
		t.Error("a fresh throttle is not at rest")
	}
}

func TestThrottleNil(t *testing.T) {
	t.Parallel()
	var th *Throttle
	th.Record(t0, signal.Overloaded)
	if !th.Admit(t0) || !th.AtRest(t0) || th.Snapshot(t0) != (Stats{}) {
		t.Error("a nil throttle must admit everything and be at rest")
	}
}

func TestThrottleConcurrent(t *testing.T) {
	t.Parallel()
	th := New(Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if th.Admit(now) {
					th.Record(now, signal.Signal(1+(i+g)%2))
				}
				th.Snapshot(now)
				th.AtRest(now)
			}
		})
	}
	wg.Wait()
	if s := th.Snapshot(t0.Add(2 * time.Second)); s.Requests == 0 {
		t.Errorf("nothing counted: %+v", s)
	}
}

// BenchmarkThrottleAdmit measures the admit path of a healthy host, the one
// every attempt takes. Run with -benchmem: it allocates nothing.
func BenchmarkThrottleAdmit(b *testing.B) {
	th := New(Config{})
	feed(th, t0, 1000, 1000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !th.Admit(t0) {
				b.Fatal("rejected")
			}
		}
	})
}

// BenchmarkThrottleAdmitRecord is an attempt's whole cost: admit, then
// Record its outcome.
func BenchmarkThrottleAdmitRecord(b *testing.B) {
	th := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if th.Admit(t0) {
				th.Record(t0, signal.Accepted)
			}
		}
	})
}
