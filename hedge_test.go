package httpretry_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestHedgeWinnerAndLoser(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(
			httpretrytest.Respond(200, "attempt body").After(10*time.Second).RespondOnCancel(),
			httpretrytest.Respond(201, "attempt body").After(100*time.Millisecond).RespondOnCancel(),
		)
		var lost []int
		tr := &httpretry.Transport{Base: base,
			Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}},
			OnAttempt: func(a httpretry.Attempt) {
				if a.Lost {
					lost = append(lost, a.N)
				}
			}}
		start := time.Now()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, site, strings.NewReader(`{"q":1}`))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode, "the hedge answered first")
		assert.Equal(t, 1100*time.Millisecond, time.Since(start))
		assert.Equal(t, "attempt body", readAll(t, resp.Body))
		resp.Body.Close()
		synctest.Wait() // let the loser be reaped

		assert.Equal(t, []int{1}, lost)
		reqs := base.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, reqs[0].Header.Get("Idempotency-Key"), reqs[1].Header.Get("Idempotency-Key"))
		assert.NotEmpty(t, reqs[0].Header.Get("Idempotency-Key"))
		assert.Equal(t, `{"q":1}`, string(reqs[0].Body))
		assert.Equal(t, `{"q":1}`, string(reqs[1].Body), "each hedge has its own body")
		cancelled := 0
		for _, r := range reqs {
			if r.ContextErr != nil {
				cancelled++
			}
		}
		assert.Equal(t, 1, cancelled, "the loser was cancelled")
		httpretrytest.CheckBodiesClosed(t, reqs)
	})
}

func TestHedgeFastAnswerSendsNoHedge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200).After(500 * time.Millisecond).RespondOnCancel())
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, base.Requests(), 1)
	})
}

func TestHedgeRoundsThenRetries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Attempts 1 and 2 (a round) both fail; after the backoff, attempt 3
		// starts the next round and succeeds.
		base := httpretrytest.NewScript(
			httpretrytest.Status(503).After(2*time.Second).RespondOnCancel(),
			httpretrytest.Status(503).After(500*time.Millisecond).RespondOnCancel(),
			httpretrytest.Status(200).After(100*time.Millisecond).RespondOnCancel(),
		)
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Backoff: backoff.Constant(time.Second),
			Hedge:   httpretry.HedgePolicy{Delay: time.Second},
		}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		reqs := base.Requests()
		require.Len(t, reqs, 3)
		assert.Equal(t, 3, reqs[2].Attempt)
		// Round 1 ends when attempt 1 fails at 2 s; wait 1 s; attempt 3 answers at 3.1 s.
		assert.Equal(t, 3100*time.Millisecond, time.Since(start))
		synctest.Wait()
		httpretrytest.CheckBodiesClosed(t, base.Requests())
	})
}

func TestHedgeOnlyForReplayableRequests(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200).After(5 * time.Second).RespondOnCancel())
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, site, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, base.Requests(), 1, "an unkeyed PATCH is never sent twice")
	})
}

// TestHedgesAreNotChargedToTheRetryBudget: hedges have a budget of their
// own; a retry budget with room for two retries is left untouched by
// three hedges, and a hedge that wins is not refunded.
func TestHedgesAreNotChargedToTheRetryBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		slow := httpretrytest.Status(200).After(10 * time.Second).RespondOnCancel()
		base := httpretrytest.NewScript(slow, slow, slow, httpretrytest.Status(200).After(time.Second).RespondOnCancel())
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Hedge: httpretry.HedgePolicy{Delay: time.Second, MaxHedges: 3},
			NewBudget: func(string) httpretry.Budget {
				return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
			},
		}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		reqs := base.Requests()
		assert.Len(t, reqs, 4, "the first attempt and three hedges")
		httpretrytest.CheckBodiesClosed(t, reqs)
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.Equal(t, 10.0, st[0].Budget.Available, "the retry budget paid for none of them")
		assert.True(t, st[0].Hedging != nil)
		assert.Equal(t, 1.0, st[0].Hedging.Tokens, "the hedge budget paid for three, the winner included")
	})
}

// TestHedgeBudgetBrownout: when every attempt of a host is slow, its
// hedges stay within 4 % of its requests plus a burst of 4, fixed delay or
// not, where a fixed delay without a budget would double the load.
func TestHedgeBudgetBrownoutThroughTransport(t *testing.T) {
	t.Parallel()
	for _, hp := range []httpretry.HedgePolicy{
		{Delay: 100 * time.Millisecond},
		{Delay: 100 * time.Millisecond, Adaptive: true, MinSamples: 1_000_000},
	} {
		synctest.Test(t, func(t *testing.T) {
			base := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Second).RespondOnCancel())
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: hp}}
			const n = 400
			var hedges int
			for range n {
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
			}
			synctest.Wait()
			hedges = len(base.Requests()) - n
			assert.LessOrEqual(t, hedges, 20, "%+v: 0.04 × 400 + 4", hp)
			assert.GreaterOrEqual(t, hedges, 19, "%+v: what it earns is spent", hp)
		})
	}
}

func TestHedgeCallerCancels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Hour).RespondOnCancel())
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(get(t, ctx))
		assert.Error(t, err)
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopContext, re.Stop)
		synctest.Wait()
		reqs := base.Requests()
		assert.Len(t, reqs, 2)
		httpretrytest.CheckBodiesClosed(t, reqs)
	})
}

// TestHugeMaxHedges: MaxHedges is bounded by MaxAttempts − 1, so any value
// is safe.
func TestHugeMaxHedges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200).After(10 * time.Second).RespondOnCancel())
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			NewBudget: httpretry.NoBudget,
			Hedge:     httpretry.HedgePolicy{Delay: time.Second, MaxHedges: math.MaxInt},
		}}
		require.NoError(t, tr.Validate())
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Len(t, base.Requests(), 4, "the first attempt and MaxAttempts − 1 hedges")
	})
}

// TestHedgingWithHugeMaxAttempts: a round of hedges allocates for the
// attempts it sends, not for MaxAttempts. With MaxAttempts 2^20 and
// MaxHedges unbounded, a round used to make a channel of 2^20 results
// (40 MiB; 2^30 attempts ran out of memory and killed the process).
func TestHedgingWithHugeMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200).After(1500 * time.Millisecond).RespondOnCancel())
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			MaxAttempts: 1 << 20,
			NewBudget:   httpretry.NoBudget,
			Hedge:       httpretry.HedgePolicy{Delay: time.Second, MaxHedges: math.MaxInt},
		}}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := tr.RoundTrip(get(t, t.Context()))
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Len(t, base.Requests(), 2, "the first attempt and one hedge")
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by one hedged call")
	})
}

// TestHedgingWithMaxIntAttempts: MaxAttempts and MaxHedges of math.MaxInt
// neither panic nor overflow: the second round hedges like the first.
func TestHedgingWithMaxIntAttempts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Round 1: attempt 1 answers 503 at 0.5 s, before any hedge. Round
		// 2: attempt 2 is slow, so a hedge (attempt 3) goes out and wins.
		base := httpretrytest.NewScript(
			httpretrytest.Status(503).After(500*time.Millisecond),
			httpretrytest.Status(200).After(10*time.Second).RespondOnCancel(),
			httpretrytest.Status(201).After(100*time.Millisecond))
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			MaxAttempts: math.MaxInt,
			Backoff:     backoff.Constant(0),
			NewBudget:   httpretry.NoBudget,
			Hedge:       httpretry.HedgePolicy{Delay: time.Second, MaxHedges: math.MaxInt},
		}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode, "the hedge of the second round answered")
		resp.Body.Close()
		synctest.Wait()
		assert.Len(t, base.Requests(), 3)
	})
}

// TestRoundIsNotHeldUpByAFailure: when an attempt of a hedged round fails
// while another is still out, its body is closed, not drained: a drain
// (up to 250 ms on a trickling body) would hold back the other attempts'
// answers, which is what hedging is for.
func TestRoundIsNotHeldUpByAFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(
			// A 503 at 1.5 s whose body trickles a byte every 50 ms.
			httpretrytest.Status(503).After(1500*time.Millisecond).Filler(1<<30).Slow(1, 50*time.Millisecond),
			// The hedge, sent at 1 s, answers at 1.6 s.
			httpretrytest.Status(200).After(600*time.Millisecond).Body("ok"))
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Hedge: httpretry.HedgePolicy{Delay: time.Second},
		}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 1600*time.Millisecond, time.Since(start), "the hedge's answer, as soon as it came")
		resp.Body.Close()
		synctest.Wait()
		reqs := base.Requests()
		require.Len(t, reqs, 2)
		assert.EqualValues(t, 1, reqs[0].ResponseBody.Closes(), "the failed attempt's body closed once")
	})
}

// TestEveryHedgedAttemptIsReported: an attempt that fails while another of
// its round is still in flight is reported too: one OnAttempt call and one
// log record per attempt Base saw.
func TestEveryHedgedAttemptIsReported(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Attempt 1 answers 503 at 3 s while attempt 2 (a hedge sent at 1 s)
		// is still out; attempt 2 answers 200 at 3.5 s.
		base := httpretrytest.NewScript(
			httpretrytest.Status(503).After(3*time.Second).RespondOnCancel(),
			httpretrytest.Status(200).After(2500*time.Millisecond).RespondOnCancel(),
		)
		var got []httpretry.Attempt
		var logged bytes.Buffer // one line per record, at every level
		tr := &httpretry.Transport{Base: base,
			Policy:    httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}},
			OnAttempt: func(a httpretry.Attempt) { got = append(got, a) },
			Logger:    slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		reqs := base.Requests()
		require.Len(t, reqs, 2)
		require.Len(t, got, 2, "one report per attempt Base saw")
		assert.Equal(t, 2, strings.Count(logged.String(), "\n"), "one log record per attempt")
		assert.Equal(t, 1, got[0].N)
		assert.Equal(t, 503, got[0].Response.StatusCode)
		assert.False(t, got[0].Retry)
		assert.Equal(t, httpretry.StopNone, got[0].Stop, "the round went on")
		assert.Equal(t, 2, got[1].N)
		assert.True(t, got[1].Hedge)
		assert.Equal(t, httpretry.StopSuccess, got[1].Stop)
		httpretrytest.CheckBodiesClosed(t, reqs)
	})
}

// TestHedgesDoNotShareTheCallersHeader: attempts in flight at once are
// clones, so a layer under the Transport that writes headers (against the
// RoundTripper contract, as some signers do) neither races with another
// attempt nor reaches the caller's request.
func TestHedgesDoNotShareTheCallersHeader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(200).After(10 * time.Second))
		signer := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			req.Header.Set("Authorization", "sig") // a contract-breaking signer
			return up.RoundTrip(req)
		})
		tr := &httpretry.Transport{Base: signer, Policy: httpretry.Policy{
			Hedge: httpretry.HedgePolicy{Delay: time.Second, MaxHedges: 2},
		}}
		req := get(t, t.Context())
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Empty(t, req.Header.Get("Authorization"), "the caller's request is untouched")
		assert.Len(t, up.Requests(), 3)
	})
}

// TestHedgesCarryPrepareRetrysEdits: the hedges of a retry round are sent
// with the headers PrepareRetry set on the round's first attempt.
func TestHedgesCarryPrepareRetrysEdits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(401), httpretrytest.Status(200).After(10*time.Second), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Backoff:  backoff.Constant(0),
			Hedge:    httpretry.HedgePolicy{Delay: time.Second},
			Classify: unauthorizedIsTransient,
			PrepareRetry: func(_ httpretry.Attempt, next *http.Request) error {
				next.Header.Set("Authorization", "Bearer fresh")
				return nil
			},
		}}
		req := get(t, t.Context())
		req.Header.Set("Authorization", "Bearer stale")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		var auth []string
		for _, r := range up.Requests() {
			auth = append(auth, r.Header.Get("Authorization"))
		}
		assert.Equal(t, []string{"Bearer stale", "Bearer fresh", "Bearer fresh"}, auth, "the hedge of the retry round too")
	})
}
