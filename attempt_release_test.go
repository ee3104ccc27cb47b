package httpretry_test

// Issue 19, defects 4, 6 and 7: what an attempt acquires from its host (a
// concurrency slot, a pacer's count, a breaker's trial) is given back on
// every path, and admission runs in an order that cannot deadlock or wait
// for nothing.

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
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

// Defect 4: a panic in Base, in Policy.Classify or in Policy.PrepareRetry
// (which http.Server recovers, so the process lives on). → The panic
// reaches the caller, and everything the attempt held is given back: with
// a concurrency limit of 1 the next call goes through at once; with pacing,
// no attempt stays counted as in flight, so a quota of 1 announced later
// admits the next call; a half-open breaker whose trial panicked lets a
// later call through once OpenFor has passed again (the user does not mind
// whether the panic counted as a failure, only that the breaker is not
// stuck). Every response body handed out and not returned is closed, the
// one a panicking Classify was looking at included. PrepareRetry runs
// before the breaker is asked, so it holds no trial: that pair is not
// tested.
func TestPanicReleasesWhatTheAttemptHeld(t *testing.T) {
	t.Parallel()
	for _, site := range []string{"Base", "Classify", "PrepareRetry"} {
		for _, held := range []string{"concurrency slot", "pacer count", "breaker trial"} {
			if site == "PrepareRetry" && held == "breaker trial" {
				continue
			}
			t.Run(site+"/"+held, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					testPanicReleases(t, site, held)
				})
			})
		}
	}
}

func testPanicReleases(t *testing.T, site, held string) {
	var armed atomic.Bool
	panicAt := func(where string) {
		if where == site && armed.CompareAndSwap(true, false) {
			panic(errIxPanic)
		}
	}
	var mu sync.Mutex
	var bodies []*httpretrytest.Body
	var sent atomic.Int32
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		panicAt("Base")
		sent.Add(1)
		code := http.StatusOK
		if req.URL.Path == "/flaky" {
			code = http.StatusServiceUnavailable
		}
		body := httpretrytest.NewBody(http.StatusText(code))
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		resp := ixRespBody(req, code, body)
		if req.URL.Path == "/quota" {
			resp.Header.Set("RateLimit", `"default";r=1;t=60`)
		}
		return resp, nil
	})
	policy := httpretry.Policy{
		Backoff: backoff.Constant(0),
		Classify: func(*http.Request, *http.Response, error) httpretry.Class {
			panicAt("Classify")
			return httpretry.ClassDefault
		},
		PrepareRetry: func(httpretry.Attempt, *http.Request) error {
			panicAt("PrepareRetry")
			return nil
		},
	}
	switch held {
	case "concurrency slot":
		policy.Overload = httpretry.OverloadPolicy{Limit: true, LimitMax: 1}
	case "pacer count":
		policy.Overload = httpretry.OverloadPolicy{Pace: true, PaceFailFast: true}
	case "breaker trial":
		policy.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: 5 * time.Second}
	}
	tr := &httpretry.Transport{Base: base, Policy: policy}
	call := func(path string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://api.example.com"+path, nil))
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	if held == "breaker trial" {
		resp, err := call("/flaky")
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		time.Sleep(6 * time.Second) // past OpenFor: half-open, the next attempt is its trial
	}
	path := "/ok"
	if site == "PrepareRetry" {
		path = "/flaky" // a retry, so that PrepareRetry runs
	}
	// Every response body handed out and not returned is closed once.
	checkClosed := func(when string) {
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		for i, b := range bodies {
			assert.Equal(t, 1, b.Closes(), "%s: response body %d of %d closed once", when, i+1, len(bodies))
		}
	}
	armed.Store(true)
	v := ixPanicked(func() { call(path) })
	require.True(t, ixIsOurPanic(v), "the caller recovers the panic, got %v", v)
	checkClosed("after the panic")

	switch held {
	case "concurrency slot":
		start := time.Now()
		_, err := call("/ok")
		require.NoError(t, err, "the panicked attempt's slot was given back")
		assert.Zero(t, time.Since(start), "no wait for a slot")
	case "pacer count":
		_, err := call("/quota") // the host announces 1 request left for 60 s
		require.NoError(t, err)
		before := sent.Load()
		_, err = call("/ok")
		require.NoError(t, err, "no attempt is left counted in flight, so the one request left is this one")
		assert.Equal(t, before+1, sent.Load())
	case "breaker trial":
		time.Sleep(10 * time.Second) // past OpenFor, even if the panic counted as a failure
		before := sent.Load()
		_, err := call("/ok")
		require.NoError(t, err, "the breaker is not stuck half-open")
		assert.Equal(t, before+1, sent.Load())
	}
	checkClosed("at the end")
}

// Defect 6: the documented token refresh, when the token endpoint is on
// the same host and fetched through the same client, with a concurrency
// limit of 1. → PrepareRetry runs before any admission, so its own request
// gets the host's slot: the call completes, with the retry carrying the
// new token, at once rather than at the deadline.
func TestPrepareRetryCanCallTheSameHost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch {
			case req.URL.Path == "/oauth/token":
				resp := ixResp(req, http.StatusOK)
				resp.Header.Set("X-Token", "fresh")
				return resp, nil
			case req.Header.Get("Authorization") == "Bearer fresh":
				return ixResp(req, http.StatusOK), nil
			}
			return ixResp(req, http.StatusUnauthorized), nil
		})
		tr := &httpretry.Transport{Base: base}
		client := &http.Client{Transport: tr}
		tr.Policy = httpretry.Policy{
			Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 1},
			Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
				if resp != nil && resp.StatusCode == http.StatusUnauthorized {
					return httpretry.ClassTransient
				}
				return httpretry.ClassDefault
			},
			PrepareRetry: func(_ httpretry.Attempt, next *http.Request) error {
				req, err := http.NewRequestWithContext(next.Context(), http.MethodPost, "https://api.example.com/oauth/token", nil)
				if err != nil {
					return err
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				next.Header.Set("Authorization", "Bearer "+resp.Header.Get("X-Token"))
				return nil
			},
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req := ixReq(t, ctx, http.MethodGet, "https://api.example.com/v1/me", nil)
		req.Header.Set("Authorization", "Bearer expired")
		start := time.Now()
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the retry carried the new token")
		assert.Less(t, time.Since(start), time.Second, "the token request did not wait for the slot its own retry held")
	})
}

// Defect 7: a host whose breaker is open, and whose other controls would
// make a call wait (its one concurrency slot held by a slow call, or its
// announced quota spent for 50 s). → Refusals that cost nothing come
// first: a new call fails at once, no time passing, with an error that
// errors.Is ErrCircuitOpen.
func TestOpenBreakerFailsFastBeforeAnyWait(t *testing.T) {
	t.Parallel()
	t.Run("slot held by a slow call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.URL.Path == "/slow" {
					select {
					case <-release:
					case <-req.Context().Done():
						return nil, context.Cause(req.Context())
					}
					return ixResp(req, http.StatusOK), nil
				}
				return ixResp(req, http.StatusServiceUnavailable), nil
			})
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 1,
				Breaker:  httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: time.Hour},
				Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 2}}}
			slow := make(chan error, 1)
			go func() {
				resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://db.example.com/slow", nil))
				if err == nil {
					resp.Body.Close()
				}
				slow <- err
			}()
			synctest.Wait() // the slow call holds a slot
			// A 503 with two attempts in flight opens the breaker and cuts
			// the limit to half of them: the slow call's slot is the only one.
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://db.example.com/fail", nil))
			require.NoError(t, err)
			resp.Body.Close()
			st := ixStatsOf(tr, "db.example.com:443")
			require.Equal(t, httpretry.BreakerOpen, st.Breaker.State, "setup: the breaker is open")
			require.GreaterOrEqual(t, st.Limit.InFlight, st.Limit.Limit, "setup: no slot is free")

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			_, err = tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://db.example.com/next", nil))
			assert.ErrorIs(t, err, httpretry.ErrCircuitOpen)
			assert.Zero(t, time.Since(start), "refused at once, not after waiting for a slot")
			close(release)
			assert.NoError(t, <-slow)
		})
	})
	t.Run("quota spent for 50 s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var sent atomic.Int32
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if sent.Add(1) > 1 {
					return ixResp(req, http.StatusOK), nil
				}
				resp := ixResp(req, http.StatusServiceUnavailable)
				resp.Header.Set("RateLimit", `"default";r=0;t=50`)
				return resp, nil
			})
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 1,
				Breaker:  httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: time.Hour},
				Overload: httpretry.OverloadPolicy{Pace: true}}}
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com/a", nil))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, httpretry.BreakerOpen, ixBreakerState(ixStatsOf(tr, "api.example.com:443")), "setup: the breaker is open")

			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			resp, err = tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://api.example.com/b", nil))
			if err == nil {
				resp.Body.Close()
			}
			assert.ErrorIs(t, err, httpretry.ErrCircuitOpen)
			assert.Zero(t, time.Since(start), "refused at once, not after waiting for the quota")
			assert.EqualValues(t, 1, sent.Load(), "nothing sent to a host whose breaker is open")
		})
	})
}

// ixStatsOf returns the Stats entry of host, or the zero HostStats (Host
// empty) when the Transport keeps no state for it.
func ixStatsOf(tr *httpretry.Transport, host string) httpretry.HostStats {
	for _, s := range tr.Stats() {
		if s.Host == host {
			return s
		}
	}
	return httpretry.HostStats{}
}

// ixBreakerState is the state of s's breaker, closed when s has none.
func ixBreakerState(s httpretry.HostStats) httpretry.BreakerState {
	if s.Breaker == nil {
		return httpretry.BreakerClosed
	}
	return s.Breaker.State
}

// A panic in a hook of the caller's that runs once an answer is in hand —
// OnAttempt, the Logger's handler, a Backoff strategy, OnCall — on a plain
// call or in a hedged round. → The panic reaches the caller, and nothing
// the call held outlives it: every response body handed to the Transport
// is closed once, every attempt's context is ended (its connection is
// given back), and no goroutine is left behind (synctest.Test fails on one
// that is).
func TestHookPanicReleasesTheResponse(t *testing.T) {
	t.Parallel()
	for _, site := range []string{"OnAttempt", "Logger", "Backoff", "OnCall"} {
		for _, when := range []string{"on the retried answer", "on the last answer", "in a hedged round"} {
			if site == "OnCall" && when != "on the last answer" || site == "Backoff" && when != "on the retried answer" {
				continue // OnCall runs once, at the end; a backoff only before a retry, which a hedged round's discarded failure is not
			}
			t.Run(site+"/"+when, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					testHookPanicReleases(t, site, when)
				})
			})
		}
	}
}

type ixPanicHandler struct {
	slog.Handler
	panicAt func(string)
}

func (h ixPanicHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h ixPanicHandler) Handle(context.Context, slog.Record) error {
	h.panicAt("Logger")
	return nil
}

type ixPanicBackoff struct{ panicAt func(string) }

func (b ixPanicBackoff) Delay(int, time.Duration, *rand.Rand) time.Duration {
	b.panicAt("Backoff")
	return 0
}

func testHookPanicReleases(t *testing.T, site, when string) {
	var armed atomic.Bool
	armed.Store(true)
	panicAt := func(where string) {
		if where == site && armed.CompareAndSwap(true, false) {
			panic(errIxPanic)
		}
	}
	var mu sync.Mutex
	var bodies []*httpretrytest.Body
	var ctxs []context.Context
	var n atomic.Int32
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		i := n.Add(1)
		mu.Lock()
		ctxs = append(ctxs, req.Context())
		mu.Unlock()
		code := http.StatusOK
		switch {
		case when == "in a hedged round" && i == 1:
			// The first attempt hangs until it is cancelled; its hedge
			// fails, and the hook panics on that failure's report
			// while the first is still out.
			<-req.Context().Done()
			return nil, req.Context().Err()
		case when != "on the last answer" && i <= 2:
			code = http.StatusServiceUnavailable
		}
		body := httpretrytest.NewBody(http.StatusText(code))
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		return ixRespBody(req, code, body), nil
	})
	policy := httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)}
	if when == "in a hedged round" {
		policy.Hedge = httpretry.HedgePolicy{Delay: 10 * time.Millisecond}
	}
	tr := &httpretry.Transport{Base: base, Policy: policy}
	switch site {
	case "OnAttempt":
		tr.OnAttempt = func(a httpretry.Attempt) {
			if when != "on the last answer" || !a.Retry {
				panicAt("OnAttempt")
			}
		}
	case "Logger":
		tr.Logger = slog.New(ixPanicHandler{panicAt: panicAt})
	case "Backoff":
		tr.Policy.Backoff = ixPanicBackoff{panicAt}
	case "OnCall":
		tr.OnCall = func(httpretry.Call) { panicAt("OnCall") }
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	v := ixPanicked(func() {
		resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://api.example.com/v1/items", nil))
		if err == nil {
			resp.Body.Close()
		}
	})
	require.True(t, ixIsOurPanic(v), "the caller recovers the hook's panic, got %v", v)
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, ctxs)
	for i, b := range bodies {
		assert.Equal(t, 1, b.Closes(), "response body %d of %d closed once", i+1, len(bodies))
	}
	for i, c := range ctxs {
		// An attempt runs in the caller's context (values added) or in one
		// of its own, which must have ended.
		if c.Done() != ctx.Done() {
			assert.Error(t, c.Err(), "attempt %d of %d: its own context ended with the call", i+1, len(ctxs))
		}
	}
}

// A Budget of the caller's whose Succeeded panics: it runs once the call
// has its answer, before the answer is handed over. → The panic reaches
// the caller, and the answer is given up as after a hook's panic: every
// response body closed once, every attempt's own context ended.
func TestBudgetSucceededPanicReleasesTheResponse(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var bodies []*httpretrytest.Body
		var ctxs []context.Context
		var n atomic.Int32
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			code := http.StatusOK
			if n.Add(1) == 1 {
				code = http.StatusServiceUnavailable
			}
			b := httpretrytest.NewBody(http.StatusText(code))
			mu.Lock()
			bodies, ctxs = append(bodies, b), append(ctxs, req.Context())
			mu.Unlock()
			return ixRespBody(req, code, b), nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Backoff: backoff.Constant(time.Millisecond), AttemptTimeout: time.Minute,
			NewBudget: func(string) httpretry.Budget { return ixPanicBudget{} }}}
		v := ixPanicked(func() {
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com/v1/items", nil))
			if err == nil {
				resp.Body.Close()
			}
		})
		require.True(t, ixIsOurPanic(v), "the caller recovers the budget's panic, got %v", v)
		require.Len(t, bodies, 2)
		for i, b := range bodies {
			assert.Equal(t, 1, b.Closes(), "response body %d closed once", i+1)
		}
		for i, c := range ctxs {
			assert.Error(t, c.Err(), "attempt %d's own context ended", i+1)
		}
	})
}

// ixPanicBudget allows every retry and panics when a call succeeds.
type ixPanicBudget struct{}

func (ixPanicBudget) Begin()               {}
func (ixPanicBudget) AllowRetry(bool) bool { return true }
func (ixPanicBudget) Refund(bool)          {}
func (ixPanicBudget) Succeeded(bool, bool) { panic(errIxPanic) }

// An attempt times out, and Base's late answer has a body whose Close
// panics when the Transport discards it. → The panic reaches the caller,
// and the timeout still counts for the host: with ConsecutiveFailures 1
// the breaker is open afterwards, as after any timeout.
func TestLateAnswerWhoseClosePanicsStillCountsTheTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			time.Sleep(100 * time.Millisecond) // ignores its context: answers late
			return ixRespBody(req, http.StatusOK, ixPanicCloser{}), nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			MaxAttempts: 1, AttemptTimeout: 10 * time.Millisecond,
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: time.Minute}}}
		v := ixPanicked(func() {
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com/v1/items", nil))
			if err == nil {
				resp.Body.Close()
			}
		})
		require.True(t, ixIsOurPanic(v), "the caller recovers the Close's panic, got %v", v)
		assert.Equal(t, httpretry.BreakerOpen, ixBreakerState(ixStatsOf(tr, "api.example.com:443")), "the timeout counted")
	})
}

// ixPanicCloser is a response body whose Close panics.
type ixPanicCloser struct{}

func (ixPanicCloser) Read([]byte) (int, error) { return 0, io.EOF }
func (ixPanicCloser) Close() error             { panic(errIxPanic) }
