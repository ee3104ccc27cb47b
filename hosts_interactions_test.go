package httpretry_test

// Issue 19, defects 9, 13 and 15: per-host state under traffic to many
// hosts, one normalisation of hosts, paths and header names, and a rate
// limit announced for a day.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// ixFloodHosts is one more than the hosts the Transport documents it keeps
// state for at a time.
const ixFloodHosts = 10_001

// Defect 9: a process that calls URLs chosen by others (a webhook sender, a
// crawler) can be fed 10,001 failing hosts. → Eviction never resets the
// protection of a real host: payments.internal's open breaker still
// refuses at once, its spent budget is still spent, and an entry with an
// attempt in flight is kept, so its concurrency slot still counts. The
// flood's hosts fail once each and keep nothing that protects them (no
// breaker, no retry spent), so a bounded table can always drop them
// instead. Payments' breaker needs a higher threshold than the 1:
// with ConsecutiveFailures 1 the breaker opens at the first failure and
// then stops every retry before the budget is asked, so the budget could
// never be spent.
func TestEvictionKeepsAHostsProtection(t *testing.T) {
	t.Parallel()
	t.Run("open breaker and spent budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var paymentsSent atomic.Int32
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.URL.Hostname() == "payments.internal" {
					paymentsSent.Add(1)
				}
				return ixResp(req, http.StatusServiceUnavailable), nil
			})
			tr := &httpretry.Transport{Base: base,
				Policy: httpretry.Policy{Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 200, OpenFor: time.Hour}},
				Hosts:  map[string]httpretry.Policy{"*.flood.test": ixFloodPolicy}}
			const payments = "payments.internal:443"
			for i := 0; ixBreakerState(ixStatsOf(tr, payments)) != httpretry.BreakerOpen; i++ {
				require.Less(t, i, 1000, "setup: the breaker does not open")
				resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://payments.internal/v1/charges", nil))
				if err == nil {
					resp.Body.Close()
				}
			}
			before := ixStatsOf(tr, payments)
			require.Less(t, before.Budget.Available, 5.0, "setup: the budget cannot pay for a retry")
			time.Sleep(time.Second) // payments is now the least recently used host

			ixFlood(t, tr)

			if after := ixStatsOf(tr, payments); assert.Equal(t, payments, after.Host, "payments.internal's state is kept") {
				assert.Equal(t, httpretry.BreakerOpen, after.Breaker.State)
				assert.True(t, after.Budget != nil)
				assert.Equal(t, before.Budget.Available, after.Budget.Available, "the budget is still spent")
			}
			sent := paymentsSent.Load()
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://payments.internal/v1/charges", nil))
			if err == nil {
				resp.Body.Close()
			}
			assert.ErrorIs(t, err, httpretry.ErrCircuitOpen, "the open breaker still refuses at once")
			assert.Equal(t, sent, paymentsSent.Load(), "nothing sent to payments.internal")
		})
	})
	t.Run("attempt in flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			var slowSent atomic.Int32
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.URL.Hostname() != "slow.internal" {
					return ixResp(req, http.StatusServiceUnavailable), nil
				}
				slowSent.Add(1)
				select {
				case <-release:
					return ixResp(req, http.StatusOK), nil
				case <-req.Context().Done():
					return nil, context.Cause(req.Context())
				}
			})
			tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{
				"slow.internal": {Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 1, LimitQueue: -1}},
				"*.flood.test":  ixFloodPolicy,
			}}
			slow := make(chan error, 1)
			go func() {
				resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://slow.internal/report", nil))
				if err == nil {
					resp.Body.Close()
				}
				slow <- err
			}()
			synctest.Wait() // the slow call holds the host's one slot
			require.Equal(t, 1, ixStatsOf(tr, "slow.internal:443").Limit.InFlight, "setup: the slot is held")
			time.Sleep(time.Second)

			ixFlood(t, tr)

			assert.Equal(t, 1, ixStatsOf(tr, "slow.internal:443").Limit.InFlight, "the entry with an attempt in flight is kept")
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://slow.internal/report", nil))
			if err == nil {
				resp.Body.Close()
			}
			assert.ErrorIs(t, err, httpretry.ErrConcurrencyLimit, "the one slot is still taken")
			assert.EqualValues(t, 1, slowSent.Load(), "only the slow call reached slow.internal")
			close(release)
			assert.NoError(t, <-slow)
		})
	})
}

// ixFloodPolicy is the policy of the flood's hosts: one attempt, no
// breaker, so each holds nothing that protects it.
var ixFloodPolicy = httpretry.Policy{MaxAttempts: 1, Breaker: httpretry.BreakerPolicy{Disabled: true}}

// ixFlood makes one failing call to each of ixFloodHosts distinct hosts
// under flood.test, each of which gets per-host state.
func ixFlood(t *testing.T, tr *httpretry.Transport) {
	t.Helper()
	for i := range ixFloodHosts {
		resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, fmt.Sprintf("https://h%d.flood.test/hook", i), nil))
		require.NoError(t, err)
		resp.Body.Close()
	}
}

// Defect 13: one normalisation of hosts, paths and header names, used
// everywhere. → A Hosts entry "pay.example.com" with MaxAttempts 1 applies
// to https://pay.example.com./x too, and both spellings share one per-host
// state; a path key "api.example.com/v1/admin" applies to /v1//admin and
// /v1/./admin (the user expects the spellings a server resolves to the
// same path to match the same key); a caller's key under a non-canonical
// header name (req.Header["idempotency-key"]) is seen: no second key is
// added, and the request counts as keyed, so a POST is retried after a 503
// even with key injection off.
func TestOneNormalisationOfHostsPathsAndHeaders(t *testing.T) {
	t.Parallel()
	t.Run("trailing-dot host", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := httpretrytest.NewScript(httpretrytest.Status(503))
			tr := &httpretry.Transport{Base: up, Hosts: map[string]httpretry.Policy{"pay.example.com": {MaxAttempts: 1}}}
			for _, url := range []string{"https://pay.example.com./x", "https://pay.example.com/x"} {
				resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, url, nil))
				require.NoError(t, err)
				resp.Body.Close()
			}
			assert.Equal(t, 2, len(up.Requests()), "one attempt for each spelling of the host")
			var hosts []string
			for _, s := range tr.Stats() {
				hosts = append(hosts, s.Host)
			}
			assert.Equal(t, 1, len(hosts), "one state for both spellings, got %q", hosts)
		})
	})
	t.Run("path spellings", func(t *testing.T) {
		for _, path := range []string{"/v1//admin", "/v1/./admin"} {
			t.Run(path, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					up := httpretrytest.NewScript(httpretrytest.Status(503))
					tr := &httpretry.Transport{Base: up, Hosts: map[string]httpretry.Policy{"api.example.com/v1/admin": {MaxAttempts: 1}}}
					resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com"+path, nil))
					require.NoError(t, err)
					resp.Body.Close()
					httpretrytest.CheckAttempts(t, up.Requests(), 1)
				})
			})
		}
	})
	t.Run("non-canonical key header: no second key", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var keys [][]string
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				var k []string
				for name, vs := range req.Header {
					if strings.EqualFold(name, "Idempotency-Key") {
						k = append(k, vs...)
					}
				}
				keys = append(keys, k)
				return ixResp(req, http.StatusOK), nil
			})
			tr := &httpretry.Transport{Base: base}
			req := ixReq(t, t.Context(), http.MethodPost, "https://payments.example.com/v1/charges", strings.NewReader(`{}`))
			req.Header["idempotency-key"] = []string{"caller-key"}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, [][]string{{"caller-key"}}, keys, "the caller's key, alone")
		})
	})
	t.Run("non-canonical key header: keyed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
			tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{Keys: httpretry.KeyPolicy{Disabled: true}}}
			req := ixReq(t, t.Context(), http.MethodPost, "https://payments.example.com/v1/charges", strings.NewReader(`{}`))
			req.Header["idempotency-key"] = []string{"caller-key"}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode, "a keyed POST is retried after a 503")
			httpretrytest.CheckAttempts(t, up.Requests(), 2)
		})
	})
}

// Defect 15: one response header (a proxy's, a CDN's, one endpoint's
// quota) announcing a quota spent for a day. → Pacing refuses later calls
// with ErrRateLimited for a while, but within five minutes of fake time a
// probe is let through, as a half-open breaker lets a trial through; when
// its answer no longer announces the limit, calls flow again. t=86401
// behaves as t=86400 (no cliff past which the header is ignored), and
// X-RateLimit-Remaining: 0 with X-RateLimit-Reset a day out behaves the
// same. Each call has a deadline of 1 s, so pacing refuses it at once
// rather than waiting.
func TestDayLongRateLimitIsProbed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header http.Header
		hints  httpretry.HintPolicy
	}{
		{"RateLimit t=86400", http.Header{"Ratelimit": {`"default";r=0;t=86400`}}, httpretry.HintPolicy{}},
		{"RateLimit t=86401", http.Header{"Ratelimit": {`"default";r=0;t=86401`}}, httpretry.HintPolicy{}},
		{"X-RateLimit-Reset a day out",
			http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"86400"}},
			httpretry.HintPolicy{RemainingHeader: "X-RateLimit-Remaining", ResetHeader: "X-RateLimit-Reset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent atomic.Int32
				base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					resp := ixResp(req, http.StatusOK)
					if sent.Add(1) == 1 {
						resp.Header = tc.header.Clone()
					}
					return resp, nil
				})
				tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
					Overload: httpretry.OverloadPolicy{Pace: true}, Hints: tc.hints}}
				call := func() error {
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					defer cancel()
					resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://api.example.com/v1/items", nil))
					if err == nil {
						resp.Body.Close()
					}
					return err
				}
				require.NoError(t, call(), "the answer that announces the quota")
				require.ErrorIs(t, call(), httpretry.ErrRateLimited, "right after the announcement the host is paced")

				start, probed := time.Now(), false
				for time.Since(start) < 5*time.Minute {
					time.Sleep(10 * time.Second)
					err := call()
					if err == nil {
						probed = true
						break
					}
					require.ErrorIs(t, err, httpretry.ErrRateLimited)
				}
				require.True(t, probed, "no probe let through in five minutes: the host is shut off until the reset")
				for i := range 3 {
					require.NoError(t, call(), "call %d after the probe's answer said nothing of a limit", i+1)
				}
			})
		})
	}
}
