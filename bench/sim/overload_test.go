package sim

import (
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestHostQueue checks the simulated host against arithmetic: a FIFO of
// 300/s answers the n-th of a burst after n service times plus the round
// trip, and a request whose caller gives up is served all the same.
func TestHostQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := NewHost(HostConfig{Capacity: 100, OneWay: time.Millisecond})
		start := time.Now()
		done := make(chan time.Duration, 3)
		for range 3 {
			go func() {
				req, _ := http.NewRequest(http.MethodGet, "http://sim.test/", nil)
				resp, err := h.RoundTrip(req)
				if assert.NoError(t, err) {
					assert.Equal(t, http.StatusOK, resp.StatusCode)
				}
				done <- time.Since(start)
			}()
		}
		for i := range 3 {
			assert.Equal(t, time.Duration(i+1)*10*time.Millisecond+2*time.Millisecond, <-done)
		}
		assert.Equal(t, []int{3}, h.Counts().Arrivals)
	})
}

// TestHostQuota: the 101st request of a window gets a 429 whose
// Retry-After and reset header count the seconds to the window's end.
func TestHostQuota(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := NewHost(HostConfig{Service: time.Millisecond, Quota: 100, QuotaWindow: 10 * time.Second})
		time.Sleep(2500 * time.Millisecond)
		var last *http.Response
		for range 101 {
			req, _ := http.NewRequest(http.MethodGet, "http://sim.test/", nil)
			resp, err := h.RoundTrip(req)
			assert.NoError(t, err)
			last = resp
		}
		assert.Equal(t, http.StatusTooManyRequests, last.StatusCode)
		assert.Equal(t, "8", last.Header.Get("Retry-After"))
		assert.Equal(t, "0", last.Header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "8", last.Header.Get("X-RateLimit-Reset"))
		assert.Equal(t, 1, Sum(h.Counts().TooMany))
	})
}

// TestMetastableOnTransport runs scenario C2 with the real Transport and
// its default budget in front of the simulated host, and checks it against
// the event loop's result (TestMetastableDefaultBudget): retries stop, the
// backlog drains at μ − λ, recovery within 1.5 × backlog/(μ − λ).
func TestMetastableOnTransport(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := DefaultMetastable(180 * time.Second)
		r := RunMetastableTransport(c, RetryBudget(), 1)
		events := RunMetastable(metastable(DefaultBudget), 1)
		assert.InEpsilon(t, events.Backlog, r.Backlog, 0.05, "backlog left by the blip")
		if assert.NotZero(t, r.Recovered, "never recovered") {
			took, limit := r.Recovered-c.BlipEnd, c.RecoveryLimit(r.Backlog)
			assert.LessOrEqual(t, took, limit*3/2, "recovered %v after the blip; limit %v", took, limit)
		}
		assert.InEpsilon(t, 280, MeanRate(r.Sent, 40*time.Second, 120*time.Second), 0.05, "no retries while the bucket is empty")
	})
}

// TestOverloadBaselines runs scenario D with today's Transport and with
// failsafe-go v0.9.8's adaptive policies under it: with a retry budget
// only, a host that queues everything collapses (goodput 0 at twice its
// load); failsafe-go's latency-gradient limiter holds it at capacity.
func TestOverloadBaselines(t *testing.T) {
	t.Parallel()
	c := DefaultOverload()
	c.Traffic.Duration, c.From = 12*time.Second, 4*time.Second
	mu := c.Host.Capacity
	t.Run("retry budget", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := RunOverload(c, RetryBudget(), 1)
			assert.Less(t, r.Goodput, 0.05*mu, "goodput")
			assert.Greater(t, r.Load, 1.9*mu, "load")
		})
	})
	t.Run("failsafe-go adaptivelimiter", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := RunOverload(c, FailsafeLimiter(), 1)
			assert.GreaterOrEqual(t, r.Goodput, 0.9*mu, "goodput")
			assert.LessOrEqual(t, r.Load, 1.1*mu, "load")
		})
	})
}

// TestQuotaWithoutPacing runs scenario E with today's Transport: every
// request completes (429s are retried after their Retry-After), but each
// worker collects about one 429 per window.
func TestQuotaWithoutPacing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := DefaultQuota(LegacyHeaders)
		c.Batch.Total = 300
		r := RunQuota(c, RetryBudget())
		assert.GreaterOrEqual(t, r.Done, 297, "completed")
		tooMany := Sum(r.Host.TooMany)
		assert.InDelta(t, 2*c.Batch.Workers, tooMany, float64(c.Batch.Workers), "429s over three windows' worth")
	})
}

// TestOverloadTable runs scenarios D (both hosts), C2 and E at full length
// with every arm available on the exported API and logs one line each,
// the figures docs/overload.md quotes: HTTPRETRY_SIM=full go test -run
// OverloadTable -v ./sim. It checks what the baselines must show.
func TestOverloadTable(t *testing.T) {
	if os.Getenv("HTTPRETRY_SIM") != "full" {
		t.Skip("a report: HTTPRETRY_SIM=full to run it")
	}
	arms := []Arm{NoRetries(), RetriesNoBudget(), RetryBudget(), FailsafeThrottler(), FailsafeLimiter()}
	for _, shed := range []time.Duration{0, 500 * time.Millisecond} {
		for _, a := range arms {
			synctest.Test(t, func(t *testing.T) {
				c := DefaultOverload()
				c.Host.QueueLimit = shed
				r := RunOverload(c, a, 1)
				mu := c.Host.Capacity
				t.Logf("D shed=%v %-40s load %.2f μ goodput %.2f μ refused %.0f/s", shed, a.Name, r.Load/mu, r.Goodput/mu,
					MeanRate(r.Refused, c.From, c.Traffic.Duration))
				if a.Name == RetryBudget().Name && shed == 0 {
					assert.Less(t, r.Goodput, 0.05*mu, "a queueing host collapses")
				}
			})
		}
	}
	for _, a := range arms {
		synctest.Test(t, func(t *testing.T) {
			c := DefaultMetastable(240 * time.Second)
			r := RunMetastableTransport(c, a, 1)
			took := "never"
			if r.Recovered > 0 {
				took = (r.Recovered - c.BlipEnd).String() + " after the blip"
			}
			t.Logf("C2 %-40s attempts/s %.0f backlog %.0f recovered %s (limit %v)", a.Name,
				MeanRate(r.Sent, 40*time.Second, 120*time.Second), r.Backlog, took, c.RecoveryLimit(r.Backlog).Round(time.Second))
		})
	}
	for _, h := range []QuotaHeaders{LegacyHeaders, RateLimitField, RetryAfterOnly} {
		synctest.Test(t, func(t *testing.T) {
			r := RunQuota(DefaultQuota(h), RetryBudget())
			t.Logf("E headers=%d retry budget: done %d, 429s %d, makespan %v", h, r.Done, Sum(r.Host.TooMany), r.Makespan.Round(time.Second))
			assert.GreaterOrEqual(t, r.Done, 990)
		})
	}
}
