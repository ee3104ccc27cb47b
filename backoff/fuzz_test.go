package backoff_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

func FuzzDelay(f *testing.F) {
	f.Add(1, int64(100*ms), int64(3*time.Second), 2.0, 0.1, uint8(2))
	f.Add(math.MaxInt, int64(time.Hour), int64(0), 10.0, 1.0, uint8(4))
	f.Add(64, int64(math.MaxInt64), int64(math.MaxInt64), 1.5, 0.5, uint8(3))
	f.Add(-5, int64(-1), int64(-1), math.NaN(), math.NaN(), uint8(0))
	f.Add(1100, int64(1), int64(2), math.Inf(1), math.Inf(-1), uint8(5))
	f.Add(7, int64(time.Second), int64(time.Millisecond), 0.5, -2.0, uint8(1))
	f.Add(64, int64(math.MaxInt64), int64(math.MaxInt64-33), 1.5, 0.5, uint8(3)) // cap rounds up as float64
	f.Fuzz(func(t *testing.T, n int, base, capd int64, factor, p float64, mode uint8) {
		j := backoff.Jitter(mode%6) - 1 // -1 and 4 are unknown modes
		b, c := time.Duration(base), time.Duration(capd)
		strategies := []struct {
			s    backoff.Strategy
			capd time.Duration // the bound Delay promises; 0: none
		}{
			{backoff.Constant(b), 0},
			{backoff.Default(), 3 * time.Second},
			{backoff.Exponential{Base: b, Factor: factor, Cap: c, Jitter: j, Percent: p}, c},
			{backoff.Linear{Base: b, Step: c - b, Cap: c, Jitter: j, Percent: p}, c},
			{backoff.Decorrelated{Base: b, Cap: c}, c},
		}
		seeded := rand.New(rand.NewPCG(uint64(n), uint64(base)))
		for _, tc := range strategies {
			prev := time.Duration(n)
			for _, r := range []*rand.Rand{nil, seeded, seeded} {
				d := tc.s.Delay(n, prev, r)
				if d < 0 || (tc.capd > 0 && d > tc.capd) {
					t.Fatalf("%#v.Delay(%d, %v) = %v, cap %v", tc.s, n, prev, d, tc.capd)
				}
				prev = d
			}
		}
		if got := backoff.Constant(b).Delay(n, 0, nil); got != max(b, 0) {
			t.Fatalf("Constant(%v) = %v", b, got)
		}
	})
}
