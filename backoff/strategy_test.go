package backoff_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/backoff"
)

const ms = time.Millisecond

// validator is what every configurable strategy implements.
type validator interface {
	backoff.Strategy
	Validate() error
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    backoff.Strategy
		want []time.Duration // for retries n = 1, 2, …
	}{
		{"constant", backoff.Constant(50 * ms), []time.Duration{50 * ms, 50 * ms, 50 * ms, 50 * ms}},
		{"constant zero", backoff.Constant(0), []time.Duration{0, 0, 0}},
		{"constant negative is zero", backoff.Constant(-time.Second), []time.Duration{0, 0, 0}},
		{"linear", backoff.Linear{Base: 100 * ms, Step: 50 * ms},
			[]time.Duration{100 * ms, 150 * ms, 200 * ms, 250 * ms, 300 * ms}},
		{"linear capped", backoff.Linear{Base: 100 * ms, Step: 50 * ms, Cap: 180 * ms},
			[]time.Duration{100 * ms, 150 * ms, 180 * ms, 180 * ms}},
		{"linear no step", backoff.Linear{Base: 70 * ms}, []time.Duration{70 * ms, 70 * ms, 70 * ms}},
		{"exponential factor 2 capped", backoff.Exponential{Base: 100 * ms, Factor: 2, Cap: 3 * time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3 * time.Second, 3 * time.Second}},
		{"exponential factor 0 means 2", backoff.Exponential{Base: 100 * ms},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms}},
		{"exponential factor 1.5", backoff.Exponential{Base: 100 * ms, Factor: 1.5, Cap: time.Second},
			[]time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond,
				506250 * time.Microsecond, 759375 * time.Microsecond, time.Second, time.Second}},
		{"exponential factor 10", backoff.Exponential{Base: ms, Factor: 10, Cap: time.Hour},
			[]time.Duration{ms, 10 * ms, 100 * ms, time.Second, 10 * time.Second,
				100 * time.Second, 1000 * time.Second, time.Hour, time.Hour}},
		{"exponential factor 1 is constant", backoff.Exponential{Base: 30 * ms, Factor: 1},
			[]time.Duration{30 * ms, 30 * ms, 30 * ms}},
		{"exponential zero value", backoff.Exponential{}, []time.Duration{0, 0, 0}},
		{"brooker's schedule: base doubled", backoff.Exponential{Base: 10 * ms, Cap: 2 * time.Second},
			[]time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, 1280 * ms, 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make([]time.Duration, len(tt.want))
			for i := range got {
				got[i] = tt.s.Delay(i+1, 0, nil)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestExponentialFormula pins the un-jittered exponential delay to the plain
// formula base·factor^(n−1), evaluated with math.Pow and saturated at the
// largest Duration, across the fast paths Delay takes.
func TestExponentialFormula(t *testing.T) {
	t.Parallel()
	ns := []int{1 << 20, 1 << 30, math.MaxInt}
	for n := 1; n <= 1200; n++ {
		ns = append(ns, n)
	}
	for _, f := range []float64{1 + 1e-12, 1.0001, 1.1, 1.5, 1.7, 2, math.E, 3, 7.3, 10, 1e3} {
		for _, base := range []time.Duration{1, ms, 100 * ms, time.Hour, math.MaxInt64} {
			e := backoff.Exponential{Base: base, Factor: f}
			for _, n := range ns {
				want := time.Duration(math.MaxInt64)
				if x := float64(base) * math.Pow(f, float64(n-1)); x < math.MaxInt64 {
					want = time.Duration(x)
				}
				if got := e.Delay(n, 0, nil); got != want {
					require.Failf(t, "exponential delay differs from the formula", "base %v factor %v n %d: got %v, want %v", base, f, n, got, want)
				}
			}
		}
	}
}

func TestDelayBeforeFirstRetryIsBase(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 0, -1, math.MinInt} {
		assert.Equal(t, 100*ms, backoff.Exponential{Base: 100 * ms, Factor: 3}.Delay(n, 0, nil), "exponential n=%d", n)
		assert.Equal(t, 100*ms, backoff.Linear{Base: 100 * ms, Step: ms}.Delay(n, 0, nil), "linear n=%d", n)
	}
}

// meanMinUniform is the analytic mean of min(c, U(a, b)) for a ≤ c.
func meanMinUniform(a, b, c float64) float64 {
	if c >= b {
		return (a + b) / 2
	}
	return ((c*c-a*a)/2 + c*(b-c)) / (b - a)
}

func TestJitterDistribution(t *testing.T) {
	t.Parallel()
	const draws = 200_000
	sec := float64(time.Second)
	tests := []struct {
		name   string
		s      backoff.Strategy
		n      int
		prev   time.Duration
		lo, hi time.Duration // exact support
		cap    time.Duration
		mean   float64 // analytic, in ns
	}{
		{"none", backoff.Exponential{Base: time.Second, Cap: 10 * time.Second}, 1, 0,
			time.Second, time.Second, 10 * time.Second, sec},
		{"full", backoff.Exponential{Base: time.Second, Cap: 10 * time.Second, Jitter: backoff.FullJitter}, 1, 0,
			0, time.Second, 10 * time.Second, sec / 2},
		{"full below cap", backoff.Exponential{Base: time.Second, Cap: 3 * time.Second, Jitter: backoff.FullJitter}, 5, 0,
			0, 3 * time.Second, 3 * time.Second, 1.5 * sec},
		{"equal", backoff.Exponential{Base: time.Second, Cap: 10 * time.Second, Jitter: backoff.EqualJitter}, 1, 0,
			time.Second / 2, time.Second, 10 * time.Second, 0.75 * sec},
		{"percent default 10%", backoff.Exponential{Base: time.Second, Cap: 10 * time.Second, Jitter: backoff.PercentJitter}, 1, 0,
			900 * ms, 1100 * ms, 10 * time.Second, sec},
		{"percent 50%", backoff.Linear{Base: time.Second, Jitter: backoff.PercentJitter, Percent: 0.5}, 1, 0,
			500 * ms, 1500 * ms, 0, sec},
		// Near the cap the spread is centred on cap/(1+p), whole below the cap.
		{"percent lowered below the cap", backoff.Exponential{Base: time.Second, Cap: 1100 * ms, Jitter: backoff.PercentJitter}, 3, 0,
			900 * ms, 1100 * ms, 1100 * ms, sec},
		{"decorrelated first retry", backoff.Decorrelated{Base: 100 * ms, Cap: time.Second}, 1, 0,
			100 * ms, 300 * ms, time.Second, meanMinUniform(0.1, 0.3, 1) * sec},
		{"decorrelated capped", backoff.Decorrelated{Base: 100 * ms, Cap: time.Second}, 7, 500 * ms,
			100 * ms, time.Second, time.Second, meanMinUniform(0.1, 1.5, 1) * sec},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(2015, uint64(i)))
			var sum float64
			for range draws {
				d := tt.s.Delay(tt.n, tt.prev, r)
				if d < tt.lo || d > tt.hi || d < 0 || (tt.cap > 0 && d > tt.cap) {
					require.Failf(t, "delay outside its support", "%v not in [%v, %v], cap %v", d, tt.lo, tt.hi, tt.cap)
				}
				sum += float64(d)
			}
			mean := sum / draws
			t.Logf("mean %v, analytic %v (%+.3f%%)", time.Duration(mean), time.Duration(tt.mean), 100*(mean-tt.mean)/tt.mean)
			assert.InEpsilon(t, tt.mean, mean, 0.02)
		})
	}
}

// TestDecorrelatedChain feeds each delay back as prev, as a retry loop does,
// and measures the bunching at the cap reported in Polly#530.
func TestDecorrelatedChain(t *testing.T) {
	t.Parallel()
	const (
		base, capd = 10 * ms, time.Second
		steps      = 200_000
		warmup     = 100 // the chain saturates within ~log3(cap/base) ≈ 5 steps
	)
	s := backoff.Decorrelated{Base: base, Cap: capd}
	r := rand.New(rand.NewPCG(530, 530))
	var prev time.Duration
	var pinned, fromCap, pinnedFromCap, counted int
	for i := range steps {
		d := s.Delay(i+1, prev, r)
		if d < base || d > capd {
			require.Failf(t, "delay outside [base, cap]", "%v", d)
		}
		if i >= warmup {
			counted++
			if d == capd {
				pinned++
			}
			if prev == capd {
				fromCap++
				if d == capd {
					pinnedFromCap++
				}
			}
		}
		prev = d
	}
	// From prev = cap the draw is U(base, 3·cap), above cap with probability
	// 2·cap/(3·cap − base) = 2/(3 − base/cap): exact, so a tight bound.
	wantFromCap := 2 / (3 - float64(base)/float64(capd))
	gotFromCap := float64(pinnedFromCap) / float64(fromCap)
	overall := float64(pinned) / float64(counted)
	t.Logf("pinned at cap: %.4f of all saturated draws; %.4f of draws from prev = cap (analytic %.4f)",
		overall, gotFromCap, wantFromCap)
	assert.InDelta(t, wantFromCap, gotFromCap, 0.01)
	// Overall the fraction is much lower: after a draw below the cap the
	// chain restarts from a smaller prev and needs several steps to climb
	// back. Its stationary value depends on cap/base and has no simple closed
	// form; an independent re-run of Brooker's formula (1e6 steps) gives 0.315
	// for cap = 100·base, 0.27 for his 5 ms/2 s, 0.48 for cap = 10·base. So
	// "two thirds" holds only for the step after a capped delay; the bound
	// below checks the overall value is the one the formula produces.
	assert.InDelta(t, 0.315, overall, 0.02)
}

func TestOverflow(t *testing.T) {
	t.Parallel()
	ns := []int{1, 2, 30, 62, 63, 64, 65, 100, 1000, 1100, 1101, 1 << 30, math.MaxInt - 1, math.MaxInt}
	bases := []time.Duration{time.Nanosecond, time.Second, time.Hour}
	factors := []float64{1.5, 2, 10}
	modes := []backoff.Jitter{backoff.NoJitter, backoff.FullJitter, backoff.EqualJitter, backoff.PercentJitter}
	r := rand.New(rand.NewPCG(1, 1))
	check := func(t *testing.T, what string, d, capd time.Duration) {
		t.Helper()
		if d < 0 || (capd > 0 && d > capd) {
			require.Failf(t, "delay out of range", "%s: %v, cap %v", what, d, capd)
		}
	}
	// Caps above 2^53 ns are not exact as float64 and may round up.
	for _, capd := range []time.Duration{0, 3 * time.Second, 1<<60 + 255, math.MaxInt64 - 33, math.MaxInt64} {
		for _, base := range bases {
			for _, f := range factors {
				for _, j := range modes {
					e := backoff.Exponential{Base: base, Factor: f, Cap: capd, Jitter: j}
					l := backoff.Linear{Base: base, Step: base, Cap: capd, Jitter: j}
					for _, n := range ns {
						check(t, "exponential", e.Delay(n, 0, r), capd)
						check(t, "linear", l.Delay(n, 0, r), capd)
					}
				}
			}
			dc := backoff.Decorrelated{Base: base, Cap: capd}
			for _, prev := range []time.Duration{0, base, time.Hour, math.MaxInt64 / 3, math.MaxInt64} {
				check(t, "decorrelated", dc.Delay(1, prev, r), capd)
			}
		}
	}

	t.Run("uncapped saturates", func(t *testing.T) {
		t.Parallel()
		for _, f := range factors {
			e := backoff.Exponential{Base: time.Hour, Factor: f}
			prev := time.Duration(0)
			for n := 1; n <= 200; n++ {
				d := e.Delay(n, 0, nil)
				require.GreaterOrEqual(t, d, prev, "factor %v: not monotonic at n=%d", f, n)
				prev = d
			}
			assert.Equal(t, time.Duration(math.MaxInt64), prev, "factor %v", f)
			assert.Equal(t, time.Duration(math.MaxInt64), e.Delay(math.MaxInt, 0, nil), "factor %v", f)
		}
		l := backoff.Linear{Base: time.Hour, Step: time.Hour}
		assert.Equal(t, time.Duration(math.MaxInt64), l.Delay(math.MaxInt, 0, nil))
		// The shape is capped (here at the largest Duration) before percent
		// jitter, so the draw is in [0.9·max, max].
		pj := backoff.Exponential{Base: time.Hour, Jitter: backoff.PercentJitter}
		assert.GreaterOrEqual(t, pj.Delay(math.MaxInt, 0, nil), time.Duration(math.MaxInt64/10*9))
	})
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		s       validator
		n       int
		lo, hi  time.Duration // the documented correction's support at retry n
		wantErr string
	}{
		{"negative base", backoff.Exponential{Base: -time.Second}, 3, 0, 0, "negative base"},
		{"negative cap means none", backoff.Exponential{Base: 100 * ms, Cap: -time.Second}, 3, 400 * ms, 400 * ms, "negative cap"},
		{"cap below base wins", backoff.Exponential{Base: time.Second, Cap: 500 * ms}, 3, 500 * ms, 500 * ms, "cap 500ms below base 1s"},
		{"factor 0.5 means 2", backoff.Exponential{Base: 100 * ms, Factor: 0.5}, 3, 400 * ms, 400 * ms, "factor 0.5"},
		{"factor negative means 2", backoff.Exponential{Base: 100 * ms, Factor: -3}, 3, 400 * ms, 400 * ms, "factor -3"},
		{"factor NaN means 2", backoff.Exponential{Base: 100 * ms, Factor: math.NaN()}, 3, 400 * ms, 400 * ms, "factor NaN"},
		{"factor +Inf means 2", backoff.Exponential{Base: 100 * ms, Factor: math.Inf(1)}, 3, 400 * ms, 400 * ms, "factor +Inf"},
		{"factor -Inf means 2", backoff.Exponential{Base: 100 * ms, Factor: math.Inf(-1)}, 3, 400 * ms, 400 * ms, "factor -Inf"},
		{"percent negative is 0", backoff.Exponential{Base: time.Second, Jitter: backoff.PercentJitter, Percent: -0.5}, 1,
			time.Second, time.Second, "percent -0.5 outside [0, 1]"},
		{"percent NaN is 0", backoff.Linear{Base: time.Second, Jitter: backoff.PercentJitter, Percent: math.NaN()}, 1,
			time.Second, time.Second, "percent NaN"},
		{"percent above 1 is 1", backoff.Exponential{Base: time.Second, Jitter: backoff.PercentJitter, Percent: 1.5}, 1,
			0, 2 * time.Second, "percent 1.5"},
		{"unknown jitter is none", backoff.Exponential{Base: time.Second, Jitter: 7}, 1, time.Second, time.Second, "unknown jitter mode 7"},
		{"negative jitter is none", backoff.Linear{Base: time.Second, Jitter: -1}, 1, time.Second, time.Second, "unknown jitter mode -1"},
		{"linear negative step is 0", backoff.Linear{Base: 100 * ms, Step: -50 * ms}, 3, 100 * ms, 100 * ms, "negative step"},
		{"linear negative base", backoff.Linear{Base: -time.Second, Step: 10 * ms}, 3, 20 * ms, 20 * ms, "negative base"},
		{"linear cap below base", backoff.Linear{Base: time.Second, Cap: ms}, 1, ms, ms, "below base"},
		{"decorrelated negative base", backoff.Decorrelated{Base: -time.Second}, 1, 0, 0, "negative base"},
		{"decorrelated negative cap", backoff.Decorrelated{Base: time.Hour, Cap: -1}, 1, time.Hour, 3 * time.Hour, "negative cap"},
		{"decorrelated cap below base", backoff.Decorrelated{Base: time.Second, Cap: 500 * ms}, 1, 500 * ms, 500 * ms, "below base"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(i), 41))
			var seen []time.Duration
			require.NotPanics(t, func() {
				for range 1000 {
					seen = append(seen, tt.s.Delay(tt.n, 0, r))
				}
			})
			assert.GreaterOrEqual(t, slices.Min(seen), tt.lo)
			assert.LessOrEqual(t, slices.Max(seen), tt.hi)
			err := tt.s.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}

	t.Run("every problem reported", func(t *testing.T) {
		t.Parallel()
		err := backoff.Exponential{Base: -1, Factor: 0.5, Jitter: 9, Percent: 2}.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "negative base")
		assert.Contains(t, err.Error(), "factor 0.5")
		assert.Contains(t, err.Error(), "unknown jitter mode 9")
	})
}

func TestValidateAcceptsValid(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]validator{
		"default":             backoff.Default(),
		"exponential zero":    backoff.Exponential{},
		"factor 1":            backoff.Exponential{Base: ms, Factor: 1},
		"cap equals base":     backoff.Exponential{Base: time.Second, Cap: time.Second},
		"percent 1":           backoff.Exponential{Base: time.Second, Jitter: backoff.PercentJitter, Percent: 1},
		"equal jitter":        backoff.Exponential{Base: time.Second, Factor: 1.5, Jitter: backoff.EqualJitter},
		"linear zero":         backoff.Linear{},
		"linear full":         backoff.Linear{Base: ms, Step: ms, Cap: time.Second, Jitter: backoff.FullJitter},
		"decorrelated zero":   backoff.Decorrelated{},
		"decorrelated capped": backoff.Decorrelated{Base: 5 * ms, Cap: 2 * time.Second},
	} {
		assert.NoError(t, s.Validate(), name)
	}
}

func TestJitterString(t *testing.T) {
	t.Parallel()
	for j, want := range map[backoff.Jitter]string{
		backoff.NoJitter: "none", backoff.FullJitter: "full", backoff.EqualJitter: "equal",
		backoff.PercentJitter: "percent", 7: "Jitter(7)", -1: "Jitter(-1)",
	} {
		assert.Equal(t, want, j.String())
	}
}

func TestRandomness(t *testing.T) {
	t.Parallel()
	s := backoff.Default()

	t.Run("nil rand", func(t *testing.T) {
		t.Parallel()
		seen := map[time.Duration]bool{}
		for range 100 {
			d := s.Delay(3, 0, nil)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, 400*ms)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 90, "nil rand should draw varied delays")
	})

	t.Run("same seed same schedule", func(t *testing.T) {
		t.Parallel()
		draw := func() []time.Duration {
			r := rand.New(rand.NewPCG(7, 7))
			out := make([]time.Duration, 10)
			for i := range out {
				out[i] = s.Delay(i+1, 0, r)
			}
			return out
		}
		assert.Equal(t, draw(), draw())
	})

	t.Run("nil rand independent across goroutines", func(t *testing.T) {
		t.Parallel()
		var seqs [2][32]time.Duration
		var wg sync.WaitGroup
		for g := range seqs {
			wg.Go(func() {
				for i := range seqs[g] {
					seqs[g][i] = s.Delay(5, 0, nil)
				}
			})
		}
		wg.Wait()
		assert.NotEqual(t, seqs[0], seqs[1])
	})
}
