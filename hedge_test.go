package httpretry_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// slowBase answers attempt n after latency[n-1] (the last entry repeats)
// with status codes[n-1], or when the attempt is cancelled, with a body it
// tracks so the test can check every body was closed.
type slowBase struct {
	mu      sync.Mutex
	latency []time.Duration
	codes   []int
	bodies  []*trackedBody
	seen    []seen
	ctxErrs []error
}

func (s *slowBase) RoundTrip(req *http.Request) (*http.Response, error) {
	n, _ := httpretry.AttemptFromContext(req.Context())
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	s.mu.Lock()
	s.seen = append(s.seen, seen{attempt: n, header: req.Header.Clone(), body: string(body), at: time.Now()})
	lat, code := s.latency[min(n, len(s.latency))-1], s.codes[min(n, len(s.codes))-1]
	s.mu.Unlock()
	select {
	case <-time.After(lat):
	case <-req.Context().Done():
		s.mu.Lock()
		s.ctxErrs = append(s.ctxErrs, req.Context().Err())
		s.mu.Unlock()
		// A Base may still hand back a response after cancellation; it
		// must be closed by whoever receives it.
	}
	tb := &trackedBody{Reader: strings.NewReader("attempt body")}
	s.mu.Lock()
	s.bodies = append(s.bodies, tb)
	s.mu.Unlock()
	return &http.Response{StatusCode: code, Body: tb, Request: req}, nil
}

func TestHedgeWinnerAndLoser(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: []time.Duration{10 * time.Second, 100 * time.Millisecond}, codes: []int{200, 201}}
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
		require.Len(t, base.seen, 2)
		assert.Equal(t, base.seen[0].header.Get("Idempotency-Key"), base.seen[1].header.Get("Idempotency-Key"))
		assert.NotEmpty(t, base.seen[0].header.Get("Idempotency-Key"))
		assert.Equal(t, `{"q":1}`, base.seen[0].body)
		assert.Equal(t, `{"q":1}`, base.seen[1].body, "each hedge has its own body")
		assert.Len(t, base.ctxErrs, 1, "the loser was cancelled")
		for i, b := range base.bodies {
			assert.EqualValues(t, 1, b.closed.Load(), "body %d", i)
		}
	})
}

func TestHedgeFastAnswerSendsNoHedge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: []time.Duration{500 * time.Millisecond}, codes: []int{200}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, base.seen, 1)
	})
}

func TestHedgeRoundsThenRetries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Attempts 1 and 2 (a round) both fail; after the backoff, attempt 3
		// starts the next round and succeeds.
		base := &slowBase{latency: []time.Duration{2 * time.Second, 500 * time.Millisecond, 100 * time.Millisecond}, codes: []int{503, 503, 200}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Backoff: backoff.Constant(time.Second),
			Hedge:   httpretry.HedgePolicy{Delay: time.Second},
		}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		require.Len(t, base.seen, 3)
		assert.Equal(t, 3, base.seen[2].attempt)
		// Round 1 ends when attempt 1 fails at 2 s; wait 1 s; attempt 3 answers at 3.1 s.
		assert.Equal(t, 3100*time.Millisecond, time.Since(start))
		synctest.Wait()
		for i, b := range base.bodies {
			assert.EqualValues(t, 1, b.closed.Load(), "body %d", i)
		}
	})
}

func TestHedgeOnlyForReplayableRequests(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: []time.Duration{5 * time.Second}, codes: []int{200}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, site, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, base.seen, 1, "an unkeyed PATCH is never sent twice")
	})
}

// TestHedgesAreNotChargedToTheRetryBudget: hedges have a budget of their
// own; a retry budget with room for two retries is left untouched by
// three hedges, and a hedge that wins is not refunded.
func TestHedgesAreNotChargedToTheRetryBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, time.Second}, codes: []int{200}}
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
		assert.Len(t, base.seen, 4, "the first attempt and three hedges")
		for i, b := range base.bodies {
			assert.EqualValues(t, 1, b.closed.Load(), "body %d", i)
		}
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.Equal(t, 10.0, st[0].BudgetAvailable, "the retry budget paid for none of them")
		assert.True(t, st[0].HasHedgeBudget)
		assert.Equal(t, 1.0, st[0].HedgeTokens, "the hedge budget paid for three, the winner included")
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
			base := &slowBase{latency: []time.Duration{time.Second}, codes: []int{200}}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: hp}}
			const n = 400
			var hedges int
			for range n {
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
			}
			synctest.Wait()
			hedges = len(base.seen) - n
			assert.LessOrEqual(t, hedges, 20, "%+v: 0.04 × 400 + 4", hp)
			assert.GreaterOrEqual(t, hedges, 19, "%+v: what it earns is spent", hp)
		})
	}
}

func TestHedgeCallerCancels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: []time.Duration{time.Hour}, codes: []int{200}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		ctx, cancel := contextWithTimeout(t, 1500*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(get(t, ctx))
		assert.Error(t, err)
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopContext, re.Reason)
		synctest.Wait()
		assert.Len(t, base.seen, 2)
		for i, b := range base.bodies {
			assert.EqualValues(t, 1, b.closed.Load(), "body %d", i)
		}
	})
}

// TestHugeMaxHedges: MaxHedges is bounded by MaxAttempts − 1, so any value
// is safe.
func TestHugeMaxHedges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: []time.Duration{10 * time.Second}, codes: []int{200}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			NewBudget: httpretry.NoBudget,
			Hedge:     httpretry.HedgePolicy{Delay: time.Second, MaxHedges: math.MaxInt},
		}}
		require.NoError(t, tr.Validate())
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Len(t, base.seen, 4, "the first attempt and MaxAttempts − 1 hedges")
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
		base := &slowBase{latency: []time.Duration{3 * time.Second, 2500 * time.Millisecond}, codes: []int{503, 200}}
		var got []httpretry.Attempt
		var records int
		tr := &httpretry.Transport{Base: base,
			Policy:    httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Second}},
			OnAttempt: func(a httpretry.Attempt) { got = append(got, a) },
			Logger:    slog.New(countHandler{&records}),
		}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		require.Len(t, base.seen, 2)
		require.Len(t, got, 2, "one report per attempt Base saw")
		assert.Equal(t, 2, records)
		assert.Equal(t, 1, got[0].N)
		assert.Equal(t, 503, got[0].Response.StatusCode)
		assert.False(t, got[0].Retry)
		assert.Equal(t, httpretry.StopNone, got[0].Stop, "the round went on")
		assert.Equal(t, 2, got[1].N)
		assert.True(t, got[1].Hedge)
		assert.Equal(t, httpretry.StopSuccess, got[1].Stop)
		for i, b := range base.bodies {
			assert.EqualValues(t, 1, b.closed.Load(), "body %d", i)
		}
	})
}

// countHandler counts the records it is given, at every level.
type countHandler struct{ n *int }

func (h countHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countHandler) Handle(context.Context, slog.Record) error { *h.n++; return nil }
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countHandler) WithGroup(string) slog.Handler             { return h }
