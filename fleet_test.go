package httpretry_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Transports that share an httpretrytest.Fleet stand for the processes of
// a fleet.

// One process told 429 Retry-After: 10 holds every process's new attempts
// to the host until then: nothing of the others reaches it in the window.
func TestFleetSharesACoolDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var cooling time.Time
		arrivals := map[string][]time.Duration{} // process → when its requests arrived
		start := time.Now()
		base := func(name string) http.RoundTripper {
			return httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				arrivals[name] = append(arrivals[name], time.Since(start))
				if cooling.IsZero() {
					cooling = time.Now().Add(10 * time.Second)
				}
				if time.Now().Before(cooling) {
					return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"10"}}, Body: http.NoBody, Request: req}, nil
				}
				return ixResp(req, 200), nil
			})
		}
		fleet := &httpretrytest.Fleet{}
		p := httpretry.Policy{Overload: httpretry.OverloadPolicy{Pace: true}, MaxAttempts: 1}
		a := &httpretry.Transport{Base: base("a"), Policy: p, Fleet: fleet}
		procs := []*httpretry.Transport{a}
		for _, name := range []string{"b", "c"} {
			procs = append(procs, &httpretry.Transport{Base: base(name), Policy: p, Fleet: fleet})
		}
		resp, err := a.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode)

		var wg sync.WaitGroup
		for i, tr := range procs[1:] {
			for range 5 {
				wg.Go(func() {
					time.Sleep(time.Duration(i+1) * time.Second)
					resp, err := tr.RoundTrip(get(t, t.Context()))
					if assert.NoError(t, err) {
						resp.Body.Close()
						assert.Equal(t, 200, resp.StatusCode, "held through the cool-down, then answered")
					}
				})
			}
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, name := range []string{"b", "c"} {
			require.Len(t, arrivals[name], 5)
			for _, at := range arrivals[name] {
				assert.GreaterOrEqual(t, at, 10*time.Second, "process %s sent into the fleet's cool-down", name)
			}
		}
	})
}

// A breaker opened in one process is open in all; failures count across
// the fleet, so that 50 short-lived processes of 3 calls each open it
// together against a dead host; its trial is taken by one process.
func TestFleetSharesTheBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var reached atomic.Int32
		var up atomic.Bool
		dead := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			reached.Add(1)
			if up.Load() {
				time.Sleep(100 * time.Millisecond) // the trial is in flight while the others ask
				return ixResp(req, 200), nil
			}
			return nil, httpretrytest.DialRefused()
		})
		p := httpretry.Policy{Backoff: backoff.Constant(10 * time.Millisecond),
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5, OpenFor: 10 * time.Second}}
		run := func(fleet httpretry.Fleet) (reachedHost int32, refused int) {
			reached.Store(0)
			for range 50 {
				tr := &httpretry.Transport{Base: dead, Policy: p, Fleet: fleet} // a new process
				for range 3 {
					_, err := tr.RoundTrip(get(t, t.Context()))
					if errors.Is(err, httpretry.ErrCircuitOpen) {
						refused++
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			return reached.Load(), refused
		}
		fleet := &httpretrytest.Fleet{}
		withFleet, refused := run(fleet)
		local, _ := run(nil)
		t.Logf("requests that reached the dead host: %d with the fleet's breaker, %d with local ones", withFleet, local)
		assert.LessOrEqual(t, withFleet, int32(20))
		assert.Greater(t, refused, 100)
		assert.GreaterOrEqual(t, local, int32(200))

		// Past OpenFor, one process takes the trial; it succeeds and the
		// breaker closes for all.
		time.Sleep(10 * time.Second)
		up.Store(true)
		reached.Store(0)
		var ok, open atomic.Int32
		var wg sync.WaitGroup
		for range 10 {
			tr := &httpretry.Transport{Base: dead, Policy: p, Fleet: fleet}
			wg.Go(func() {
				resp, err := tr.RoundTrip(get(t, httpretry.WithoutRetries(t.Context())))
				switch {
				case err == nil:
					resp.Body.Close()
					ok.Add(1)
				case errors.Is(err, httpretry.ErrCircuitOpen):
					open.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), reached.Load(), "one trial in the fleet")
		assert.Equal(t, int32(1), ok.Load())
		tr := &httpretry.Transport{Base: dead, Policy: p, Fleet: fleet}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err, "the trial's success closed the breaker in the fleet")
		resp.Body.Close()
	})
}

// A quota declared in the policy is the fleet's: 8 processes each wanting
// 50 a second against an account quota of 100 share it, with no 429.
func TestFleetSharesTheQuota(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := &bucket{rate: 100, burst: 10}
		fleet := &httpretrytest.Fleet{}
		p := httpretry.Policy{Overload: httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: 100, Burst: 10}}}
		var wg sync.WaitGroup
		for range 8 {
			tr := &httpretry.Transport{Base: up, Policy: p, Fleet: fleet}
			wg.Go(func() { load(t, tr, "https://api.test/", 50, 10*time.Second) })
		}
		wg.Wait()
		t.Logf("accepted %d, 429s %d", up.ok, up.over)
		assert.Zero(t, up.over)
		assert.GreaterOrEqual(t, up.ok, 950, "the quota delivered: %d in 10 s", up.ok)
	})
}

// A fleet that cannot answer (its store down) changes nothing: each
// process paces, and breaks, on its own, and no call fails for it.
func TestFleetDownFallsBackToLocalState(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fleet := &httpretrytest.Fleet{}
		fleet.SetDown(true)
		up := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: up, Fleet: fleet, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0), Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5},
			Overload: httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: 10}}}}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(get(t, ctx))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	})
}

// A call that waits for its turn at the fleet's quota is not sent when
// its turn comes if the fleet began a cool-down meanwhile: it waits for
// the cool-down's end (before, the other processes kept sending for as
// long as their queued turns lasted: 31 requests into a 3 s window).
func TestFleetCoolDownBegunWhileWaitingForATurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base, sentAt := sendLog(start, func(req *http.Request, n int) *http.Response { return ixResp(req, 200) })
		fleet := &httpretrytest.Fleet{}
		tr := &httpretry.Transport{Base: base, Fleet: fleet, Policy: httpretry.Policy{MaxAttempts: 1,
			Overload: httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: 1, Per: time.Second, Key: "acct"}}}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		done := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(get(t, t.Context())) // its turn comes at 1 s
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		time.Sleep(500 * time.Millisecond)
		fleet.Hold("acct", start.Add(10*time.Second), false) // another process was told 429 Retry-After
		err = <-done
		sent := sentAt()
		if err == nil {
			require.Len(t, sent, 2)
			assert.GreaterOrEqual(t, sent[1], 10*time.Second, "sent into the fleet's cool-down when its turn came")
		} else {
			assert.ErrorIs(t, err, httpretry.ErrRateLimited)
			assert.Len(t, sent, 1, "a refused call sent nothing")
		}
	})
}

// A process whose attempts take their turns at the fleet's share of a
// quota reads a 429 that says Retry-After: 1 (the next token is near) as
// a sign that the shares are off for a moment, not as a window: it holds
// neither itself nor the fleet for the second. Before, a process with
// fewer than four answers in its last second held the whole fleet for
// it, and 8 processes sharing a quota got a quarter of it (e2e
// TestFleetSharedQuota, CI run 33).
func TestFleetStray429DoesNotHoldTheFleet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base, sentAt := sendLog(start, func(req *http.Request, n int) *http.Response {
			if n == 1 {
				resp := ixResp(req, 429)
				resp.Header.Set("Retry-After", "1")
				return resp
			}
			return ixResp(req, 200)
		})
		fleet := &httpretrytest.Fleet{}
		p := httpretry.Policy{Overload: httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10, Key: "acct"}}}
		a := &httpretry.Transport{Base: base, Fleet: fleet, Policy: p}
		b := &httpretry.Transport{Base: base, Fleet: fleet, Policy: p}
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := a.RoundTrip(get(t, t.Context())) // 429, then 200 after the Retry-After
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
		time.Sleep(10 * time.Millisecond)
		for _, tr := range []*httpretry.Transport{a, b} {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		<-done
		cooling, _ := fleet.Held("acct", start.Add(20*time.Millisecond))
		sent := sentAt()
		require.Len(t, sent, 4)
		assert.Less(t, sent[1], 100*time.Millisecond, "the same process's next call was held: %v", sent)
		assert.Less(t, sent[2], 100*time.Millisecond, "another process's call was held: %v", sent)
		assert.True(t, cooling.IsZero(), "the fleet was held until %v", cooling.Sub(start))
	})
}

// sendLog returns a fake Base that answers the nth request (from 1) as
// respond says, and a func that returns when each request reached it,
// since start.
func sendLog(start time.Time, respond func(req *http.Request, n int) *http.Response) (http.RoundTripper, func() []time.Duration) {
	var mu sync.Mutex
	var sent []time.Duration
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		sent = append(sent, time.Since(start))
		n := len(sent)
		mu.Unlock()
		return respond(req, n), nil
	})
	return base, func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sent)
	}
}
