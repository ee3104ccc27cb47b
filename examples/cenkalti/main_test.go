package main

import (
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var _ backoff.Strategy = FromBackOff{} // the adapter is a Strategy

// interval is ExponentialBackOff's un-randomised interval before retry n:
// InitialInterval, multiplied by Multiplier (truncated to the nanosecond)
// for each retry after the first, until it reaches MaxInterval.
func interval(b *cenkalti.ExponentialBackOff, n int) time.Duration {
	iv := b.InitialInterval
	for range n - 1 {
		if float64(iv) >= float64(b.MaxInterval)/b.Multiplier {
			return b.MaxInterval
		}
		iv = time.Duration(float64(iv) * b.Multiplier)
	}
	return iv
}

// spread returns the smallest and largest of 500 delays s gives retry n.
func spread(s backoff.Strategy, n int) (lo, hi time.Duration) {
	lo = time.Duration(math.MaxInt64)
	for range 500 {
		d := s.Delay(n, 0, nil)
		lo, hi = min(lo, d), max(hi, d)
	}
	return lo, hi
}

// TestFromBackOffFollowsExponentialBackOff: with cenkalti's defaults
// (500 ms, ×1.5, ±50 %, MaxInterval 60 s), the wait before retry n lies in
// [0.5, 1.5] × its interval, n = 1 being the first; without randomisation
// it is the interval itself.
func TestFromBackOffFollowsExponentialBackOff(t *testing.T) {
	t.Parallel()
	def := cenkalti.NewExponentialBackOff()
	s := FromBackOff{New: func() cenkalti.BackOff { return cenkalti.NewExponentialBackOff() }}
	exact := FromBackOff{New: func() cenkalti.BackOff {
		b := cenkalti.NewExponentialBackOff()
		b.RandomizationFactor = 0
		return b
	}}
	for n := 1; n <= 12; n++ {
		iv := interval(def, n)
		lo, hi := spread(s, n)
		assert.GreaterOrEqual(t, lo, iv/2, "retry %d", n)
		assert.LessOrEqual(t, hi, iv*3/2+1, "retry %d", n) // +1 ns: cenkalti draws from [min, max+1)
		assert.Equal(t, iv, exact.Delay(n, 0, nil), "retry %d without randomisation", n)
	}
	assert.Equal(t, 500*time.Millisecond, exact.Delay(1, 0, nil))
	assert.Equal(t, 750*time.Millisecond, exact.Delay(2, 0, nil))
}

// TestFromBackOffCapBeforeJitter: ExponentialBackOff caps the interval and
// then randomises it, so with the interval at MaxInterval (1 s here) waits
// reach 1.5 s. httpretry's backoff.Exponential with the same shape keeps
// its cap a ceiling on the final wait.
func TestFromBackOffCapBeforeJitter(t *testing.T) {
	t.Parallel()
	s := FromBackOff{New: func() cenkalti.BackOff {
		b := cenkalti.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval = time.Second, time.Second
		return b
	}}
	_, hi := spread(s, 3)
	assert.Greater(t, hi, 1200*time.Millisecond, "above MaxInterval")
	native := backoff.Exponential{Base: time.Second, Factor: 1.5, Cap: time.Second, Jitter: backoff.PercentJitter, Percent: 0.5}
	_, nhi := spread(native, 3)
	assert.LessOrEqual(t, nhi, time.Second, "httpretry's cap holds after jitter")
}

// TestNativeEquivalent: the backoff.Exponential that main.go's comment
// offers in place of cenkalti's defaults draws, below its cap, from the
// same [0.5, 1.5] × interval.
func TestNativeEquivalent(t *testing.T) {
	t.Parallel()
	def := cenkalti.NewExponentialBackOff()
	native := backoff.Exponential{Base: 500 * time.Millisecond, Factor: 1.5, Cap: time.Minute,
		Jitter: backoff.PercentJitter, Percent: 0.5}
	for n := 1; n <= 8; n++ {
		iv := interval(def, n)
		lo, hi := spread(native, n)
		assert.GreaterOrEqual(t, lo, iv/2, "retry %d", n)
		assert.LessOrEqual(t, hi, iv*3/2, "retry %d", n)
		assert.Greater(t, hi, iv, "retry %d: jittered upward too", n)
	}
}

// TestFromBackOffStop: a Strategy cannot end retries. When the BackOff says
// Stop, the adapter repeats the last wait it had, or 0.
func TestFromBackOffStop(t *testing.T) {
	t.Parallel()
	assert.Zero(t, FromBackOff{New: func() cenkalti.BackOff { return &cenkalti.StopBackOff{} }}.Delay(1, 0, nil))
	calls := 0
	twice := FromBackOff{New: func() cenkalti.BackOff {
		calls = 0
		return backOffFunc(func() time.Duration {
			calls++
			if calls > 2 {
				return cenkalti.Stop
			}
			return time.Duration(calls) * time.Second
		})
	}}
	assert.Equal(t, 2*time.Second, twice.Delay(5, 0, nil))
	require.Error(t, FromBackOff{}.Validate())
	require.NoError(t, twice.Validate())
}

type backOffFunc func() time.Duration

func (f backOffFunc) NextBackOff() time.Duration { return f() }
func (f backOffFunc) Reset()                     {}

// TestTransportWaitsFromBackOff runs the demo's Transport against a fake
// Base that answers 503, 503, 200, on synctest's fake clock: each wait is
// one the BackOff would give, and the call succeeds on attempt 3.
func TestTransportWaitsFromBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Status(200))
		var waits []time.Duration
		rt := newTransport(base, func(a httpretry.Attempt) {
			if a.Retry {
				waits = append(waits, a.Delay)
			}
		})
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		require.Len(t, waits, 2)
		// Intervals 100 ms and 150 ms, each ±50 %.
		assert.InDelta(t, 100*time.Millisecond, waits[0], float64(50*time.Millisecond)+1)
		assert.InDelta(t, 150*time.Millisecond, waits[1], float64(75*time.Millisecond)+1)
		assert.Equal(t, waits[0]+waits[1], time.Since(start), "the waits were waited")
	})
}

// TestFromBackOffConcurrent: one adapter shared by many RoundTrips at
// once, as a Strategy is; each call builds its own BackOff, so the race
// detector finds nothing.
func TestFromBackOffConcurrent(t *testing.T) {
	t.Parallel()
	s := FromBackOff{New: func() cenkalti.BackOff { return cenkalti.NewExponentialBackOff() }}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for n := 1; n <= 4; n++ {
				assert.Positive(t, s.Delay(n, 0, nil))
			}
		})
	}
	wg.Wait()
}
