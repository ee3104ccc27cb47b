package backoff_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

var sink time.Duration

// BenchmarkDelay measures one Delay call through the Strategy interface, as a
// retry loop makes it. seeded uses a per-goroutine *rand.Rand (PCG), nil the
// runtime's generator, and parallel runs nil from every P at once, which
// must scale without contention.
func BenchmarkDelay(b *testing.B) {
	capd := 3 * time.Second
	strategies := []struct {
		name string
		s    backoff.Strategy
	}{
		{"none", backoff.Exponential{Base: 100 * ms, Cap: capd, Jitter: backoff.NoJitter}},
		{"full", backoff.Default()},
		{"equal", backoff.Exponential{Base: 100 * ms, Cap: capd, Jitter: backoff.EqualJitter}},
		{"percent", backoff.Exponential{Base: 100 * ms, Cap: capd, Jitter: backoff.PercentJitter}},
		{"full-factor-1.5", backoff.Exponential{Base: 100 * ms, Factor: 1.5, Cap: capd, Jitter: backoff.FullJitter}},
		{"linear-full", backoff.Linear{Base: 100 * ms, Step: 100 * ms, Cap: capd, Jitter: backoff.FullJitter}},
		{"constant", backoff.Constant(100 * ms)},
		{"decorrelated", backoff.Decorrelated{Base: 100 * ms, Cap: capd}},
	}
	for _, bs := range strategies {
		s := bs.s
		b.Run(bs.name+"/seeded", func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var prev time.Duration
			n := 0
			for b.Loop() {
				n = n%8 + 1
				prev = s.Delay(n, prev, r)
			}
			sink = prev
		})
		b.Run(bs.name+"/nil", func(b *testing.B) {
			var prev time.Duration
			n := 0
			for b.Loop() {
				n = n%8 + 1
				prev = s.Delay(n, prev, nil)
			}
			sink = prev
		})
		b.Run(bs.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				var prev time.Duration
				n := 0
				for pb.Next() {
					n = n%8 + 1
					prev = s.Delay(n, prev, nil)
				}
				_ = prev
			})
		})
	}
}
