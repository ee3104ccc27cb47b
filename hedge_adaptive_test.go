package httpretry_test

import (
	"context"
	"errors"
	"io"
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
	"github.com/seedhq/httpretry/httpretrytest"
)

// pacedBase answers the first attempt of call i (counted from 0, calls
// sent one after another) after first(i), and every later attempt after
// later, each with status code(i) (200 when code is nil), or when the
// attempt is cancelled.
type pacedBase struct {
	first func(i int) time.Duration
	later time.Duration
	code  func(i int) int

	mu       sync.Mutex
	calls    int
	attempts int
}

func (b *pacedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	n, _ := httpretry.AttemptFromContext(req.Context())
	b.mu.Lock()
	b.attempts++
	if n == 1 {
		b.calls++
	}
	i := b.calls - 1
	b.mu.Unlock()
	d := b.later
	if n == 1 {
		d = b.first(i)
	}
	select {
	case <-time.After(d):
	case <-req.Context().Done():
		return nil, context.Cause(req.Context())
	}
	code := 200
	if b.code != nil {
		code = b.code(i)
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// hedgedCall sends one GET through tr with ctx and returns how long it took and
// how many hedges it sent.
func hedgedCall(t *testing.T, tr *httpretry.Transport, ctx context.Context) (time.Duration, int) {
	t.Helper()
	var hedges int
	prev := tr.OnCall
	defer func() { tr.OnCall = prev }()
	tr.OnCall = func(c httpretry.Call) { hedges = c.Hedges }
	start := time.Now()
	resp, err := tr.RoundTrip(get(t, ctx))
	require.NoError(t, err)
	resp.Body.Close()
	return time.Since(start), hedges
}

func within(t *testing.T, want, got time.Duration, msg string) {
	t.Helper()
	assert.InEpsilon(t, float64(want), float64(got), 0.125, "%s: want about %v, got %v", msg, want, got)
}

// TestAdaptiveHedgeLearnsTheDelay: with nothing tuned, a host gets state
// at its first request, no hedge goes out until it has 100 samples, and
// then an attempt is hedged after twice its median (the p95 of a host this
// steady being lower).
func TestAdaptiveHedgeLearnsTheDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &pacedBase{later: 10 * time.Millisecond, first: func(i int) time.Duration {
			if i == 50 || i == 150 {
				return 10 * time.Second // stuck
			}
			return 10 * time.Millisecond
		}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Adaptive: true}}}

		_, _ = hedgedCall(t, tr, t.Context())
		st := tr.Stats()
		require.Len(t, st, 1, "state at the first request")
		assert.Equal(t, 1, st[0].Hedging.Samples)
		assert.True(t, st[0].Hedging != nil)
		assert.Equal(t, 4.0, st[0].Hedging.Tokens)
		assert.Zero(t, st[0].Hedging.Delay, "none before 100 samples")

		for i := 1; i < 150; i++ {
			d, hedges := hedgedCall(t, tr, t.Context())
			if i == 50 {
				assert.Equal(t, 10*time.Second, d, "before 100 samples, no hedge")
				assert.Zero(t, hedges)
			}
		}
		st = tr.Stats()
		assert.Equal(t, 150, st[0].Hedging.Samples)
		within(t, 10*time.Millisecond, st[0].Hedging.P50, "median")
		within(t, 20*time.Millisecond, st[0].Hedging.Delay, "twice the median")

		d, hedges := hedgedCall(t, tr, t.Context()) // call 150: stuck
		assert.Equal(t, 1, hedges)
		within(t, 30*time.Millisecond, d, "hedged after 20 ms, answered 10 ms later")
		synctest.Wait()
		st = tr.Stats()
		assert.Equal(t, 151, st[0].Hedging.Samples, "the lost first attempt is a censored sample")
		assert.Equal(t, 3.0, st[0].Hedging.Tokens, "the winning hedge was paid for")
		assert.Equal(t, 152, base.attempts)
	})
}

// TestAdaptiveHedgeFallsBackToDelay: until the host has MinSamples
// samples, Delay applies.
func TestAdaptiveHedgeFallsBackToDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &pacedBase{later: 10 * time.Millisecond, first: func(int) time.Duration { return 10 * time.Second }}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Hedge: httpretry.HedgePolicy{Adaptive: true, Delay: 50 * time.Millisecond},
		}}
		d, hedges := hedgedCall(t, tr, t.Context())
		assert.Equal(t, 1, hedges)
		assert.Equal(t, 60*time.Millisecond, d)
		assert.Equal(t, 0, tr.Stats()[0].Hedging.Samples, "a censored sample is dropped while there is no delay to compare it with")
	})
}

// TestAdaptiveHedgeSamples: only first attempts that answered and are not
// retried are samples; transient failures and retries are not, and
// requests whose policy does not hedge adaptively feed nothing.
func TestAdaptiveHedgeSamples(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &pacedBase{later: time.Millisecond, first: func(int) time.Duration { return 5 * time.Millisecond },
			code: func(i int) int {
				switch {
				case i < 10:
					return 503 // then retried: the retry answers 503 too, then 200…
				case i < 20:
					return 404
				}
				return 200
			}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			MaxAttempts: 2,
			Backoff:     backoff.Constant(0),
			Hedge:       httpretry.HedgePolicy{Adaptive: true},
		}}
		for range 10 {
			_, _ = hedgedCall(t, tr, t.Context())
		}
		assert.Equal(t, 0, tr.Stats()[0].Hedging.Samples, "503s say nothing of how long an answer takes")
		for range 10 {
			_, _ = hedgedCall(t, tr, t.Context())
		}
		assert.Equal(t, 10, tr.Stats()[0].Hedging.Samples, "a 404 is an answer")
		_, _ = hedgedCall(t, tr, httpretry.WithoutRetries(t.Context()))
		_, _ = hedgedCall(t, tr, httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) {
			p.Hedge = httpretry.HedgePolicy{Delay: time.Second}
		}))
		assert.Equal(t, 10, tr.Stats()[0].Hedging.Samples, "requests without adaptive hedging feed nothing")
		_, _ = hedgedCall(t, tr, t.Context())
		assert.Equal(t, 11, tr.Stats()[0].Hedging.Samples)
	})
}

// TestAdaptiveHedgePerRequestSettings: the latency is the host's, the
// quantile and the bounds the request's.
func TestAdaptiveHedgePerRequestSettings(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stuck := -1
		base := &pacedBase{later: time.Millisecond, first: func(i int) time.Duration {
			switch {
			case i == stuck:
				return 10 * time.Second
			case i%10 == 9:
				return 100 * time.Millisecond // a long tail: the p95 is above twice the median
			}
			return 10 * time.Millisecond
		}}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Adaptive: true}}}
		// The tail is above the delay: learn without hedging it, which
		// would spend the hedge budget, and earn a hedge per 25 calls.
		learn := func(n int) {
			ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { p.Hedge.MinDelay = time.Hour })
			for range n {
				_, hedges := hedgedCall(t, tr, ctx)
				require.Zero(t, hedges)
			}
		}
		learn(200)
		st := tr.Stats()[0]
		within(t, 10*time.Millisecond, st.Hedging.P50, "median")
		within(t, 100*time.Millisecond, st.Hedging.P95, "p95")
		within(t, 100*time.Millisecond, st.Hedging.Delay, "the p95 decides")

		for _, tc := range []struct {
			name string
			edit func(*httpretry.HedgePolicy)
			want time.Duration // when the hedge is sent
		}{
			{"default", func(*httpretry.HedgePolicy) {}, 96 * time.Millisecond},
			{"median quantile: twice the median", func(h *httpretry.HedgePolicy) { h.Quantile = 0.5 }, 20 * time.Millisecond},
			{"MaxDelay", func(h *httpretry.HedgePolicy) { h.MaxDelay = 30 * time.Millisecond }, 30 * time.Millisecond},
			{"MinDelay", func(h *httpretry.HedgePolicy) { h.MinDelay = 300 * time.Millisecond }, 300 * time.Millisecond},
			{"MinSamples above the host's", func(h *httpretry.HedgePolicy) { h.MinSamples = 5000; h.Delay = 7 * time.Millisecond }, 7 * time.Millisecond},
		} {
			base.mu.Lock()
			stuck = base.calls
			base.mu.Unlock()
			ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { tc.edit(&p.Hedge) })
			d, hedges := hedgedCall(t, tr, ctx)
			assert.Equal(t, 1, hedges, tc.name)
			within(t, tc.want+time.Millisecond, d, tc.name)
			synctest.Wait()
			learn(25)
		}
	})
}

// TestAdaptiveHedgeStateLifetime: a host with adaptive hedging keeps its
// state while it has recent samples, and loses it after ten minutes
// without a request, like any state.
func TestAdaptiveHedgeStateLifetime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Hosts whose name starts with "down" answer 503, the others 200.
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			code := 200
			if strings.HasPrefix(req.URL.Host, "down") {
				code = 503
			}
			return &http.Response{StatusCode: code, Body: http.NoBody}, nil
		})
		tr := &httpretry.Transport{Base: base,
			Policy: httpretry.Policy{MaxAttempts: 1},
			Hosts:  map[string]httpretry.Policy{"learn.example.com": {MaxAttempts: 2, Hedge: httpretry.HedgePolicy{Adaptive: true}}},
		}
		sendTo(t, tr, "learn.example.com")
		sendTo(t, tr, "up.example.com")
		hosts := func() []string {
			var h []string
			for _, s := range tr.Stats() {
				h = append(h, s.Host)
			}
			return h
		}
		assert.Equal(t, []string{"learn.example.com:443"}, hosts(), "state at the first request, for adaptive hedging only")

		time.Sleep(2 * time.Minute)
		sendTo(t, tr, "down-1.example.com") // new state sweeps the table
		assert.Equal(t, []string{"down-1.example.com:443", "learn.example.com:443"}, hosts(), "recent samples are not at rest")

		time.Sleep(11 * time.Minute)
		sendTo(t, tr, "down-2.example.com")
		assert.Equal(t, []string{"down-2.example.com:443"}, hosts(), "ten minutes idle: dropped")
	})
}

func TestHedgePolicyValidate(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{
		Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Adaptive: true, Quantile: 1, MinSamples: -1, MinDelay: -time.Second}},
		Hosts: map[string]httpretry.Policy{
			"a.example.com":        {Hedge: httpretry.HedgePolicy{Adaptive: true, Quantile: math.NaN(), MaxDelay: -1}},
			"b.example.com":        {Hedge: httpretry.HedgePolicy{Adaptive: true, MinDelay: time.Second, MaxDelay: time.Millisecond}},
			"c.example.com/search": {Hedge: httpretry.HedgePolicy{Delay: time.Millisecond, Quantile: 0.99}},
			"d.example.com":        {Hedge: httpretry.HedgePolicy{Disabled: true, Quantile: 0.99}},
			"e.example.com":        {Hedge: httpretry.HedgePolicy{Adaptive: true, Quantile: 0.5, MinSamples: 10, MinDelay: time.Millisecond, MaxDelay: time.Second}},
		},
	}
	err := tr.Validate()
	require.Error(t, err)
	assert.True(t, errors.Is(err, httpretry.ErrInvalidPolicy))
	msg := err.Error()
	for _, want := range []string{
		`Transport.Policy.Hedge.Quantile: 1 is not in (0, 1)`,
		`Transport.Policy.Hedge.MinSamples: -1 is negative`,
		`Transport.Policy.Hedge.MinDelay: -1s is negative`,
		`Transport.Hosts["a.example.com"].Hedge.Quantile: NaN is not in (0, 1)`,
		`Transport.Hosts["a.example.com"].Hedge.MaxDelay: -1ns is negative`,
		`Transport.Hosts["b.example.com"].Hedge.MinDelay: 1s is above MaxDelay (1ms)`,
		`Transport.Hosts["c.example.com/search"].Hedge.Quantile: is set without Adaptive, which it needs`,
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "d.example.com", "Disabled wins")
	assert.NotContains(t, msg, "e.example.com")
	assert.Equal(t, 7, strings.Count(msg, "\n")+1, msg)

	_, err = (&httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(200))}).RoundTrip(func() *http.Request {
		req, _ := http.NewRequestWithContext(httpretry.WithPolicy(context.Background(), func(p *httpretry.Policy) {
			p.Hedge.Adaptive, p.Hedge.Quantile = true, 2
		}), http.MethodGet, site, nil)
		return req
	}())
	assert.ErrorContains(t, err, "WithPolicy.Hedge.Quantile: 2 is not in (0, 1)")
}

// TestHedgeLateTakesTheKeptToken: once hedges on time have spent the
// hedge budget down to its last token, an attempt still unanswered at
// twice the delay gets it; after that, none.
func TestHedgeLateTakesTheKeptToken(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &pacedBase{later: time.Millisecond, first: func(int) time.Duration { return 10 * time.Second }}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: 10 * time.Millisecond}}}
		for i := range 3 {
			d, hedges := hedgedCall(t, tr, t.Context())
			assert.Equal(t, 1, hedges, "on time %d", i+1)
			assert.Equal(t, 11*time.Millisecond, d)
		}
		assert.InDelta(t, 1.08, tr.Stats()[0].Hedging.Tokens, 0.001, "4 − 3, plus 4 % for each of the two calls after the first hedge")
		d, hedges := hedgedCall(t, tr, t.Context())
		assert.Equal(t, 1, hedges)
		assert.Equal(t, 21*time.Millisecond, d, "late, at twice the delay")
		d, hedges = hedgedCall(t, tr, t.Context())
		assert.Zero(t, hedges, "the budget is spent")
		assert.Equal(t, 10*time.Second, d)
	})
}

// BenchmarkHedgingRoundTrip is a GET's success path with hedging on, over
// an in-memory Base that answers at once: what a policy that hedges costs
// a request that needs no hedge. "learning" is adaptive hedging before the
// host has its samples (the first attempt is timed and recorded, no hedge
// round); "adaptive" and "fixed" run a hedge round whose timer never
// fires (a goroutine, a timer and a cancellable context per request).
func BenchmarkHedgingRoundTrip(b *testing.B) {
	inMemory := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return okResponse, nil })
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/things", nil)
	for _, tc := range []struct {
		name  string
		hedge httpretry.HedgePolicy
	}{
		{"none", httpretry.HedgePolicy{}},
		{"learning", httpretry.HedgePolicy{Adaptive: true, MinSamples: math.MaxInt}},
		{"adaptive", httpretry.HedgePolicy{Adaptive: true, MinDelay: time.Hour}},
		{"fixed", httpretry.HedgePolicy{Delay: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			benchRT(b, &httpretry.Transport{Base: inMemory, Policy: httpretry.Policy{Hedge: tc.hedge}}, req)
		})
	}
}
