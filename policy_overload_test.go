package httpretry_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// TestOverloadPolicyIsPerHost: the controls are set per host, inherited,
// turned off with Disabled, and cannot be set on a key with a path or
// changed per request; a host with one on gets state at its first request.
func TestOverloadPolicyIsPerHost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(200)),
			Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{Throttle: true}},
			Hosts: map[string]httpretry.Policy{
				"limited.example.com": {Overload: httpretry.OverloadPolicy{Limit: true}},
				"off.example.com":     {Overload: httpretry.OverloadPolicy{Disabled: true}},
			}}
		require.NoError(t, tr.Validate())
		for _, host := range []string{"api.example.com", "limited.example.com", "off.example.com"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		stats := tr.Stats()
		require.Len(t, stats, 2, "state at the first request for hosts with a control on, none for the other")
		assert.True(t, stats[0].Throttle != nil && stats[0].Limit == nil, "api.example.com inherits throttling")
		assert.True(t, stats[1].Limit != nil && stats[1].Throttle == nil, "limited.example.com replaces it")
		assert.Equal(t, 1000, stats[1].Limit.Limit)

		ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { p.Overload.Throttle = false })
		_, err := tr.RoundTrip(get(t, ctx))
		require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
		assert.ErrorContains(t, err, "WithPolicy.Overload: is per host")
	})
}

func TestOverloadPolicyValidation(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{
		Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{Throttle: true, ThrottleK: 0.5, ThrottleWindow: -time.Second}},
		Hosts: map[string]httpretry.Policy{
			"a.example.com":    {Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: -1, LimitMin: -2}},
			"b.example.com":    {Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 10, LimitMin: 20}},
			"c.example.com":    {Overload: httpretry.OverloadPolicy{ThrottleK: 1.1, LimitQueue: 5, PaceFailFast: true}},
			"d.example.com/v1": {Overload: httpretry.OverloadPolicy{Pace: true}},
			"e.example.com":    {Hints: httpretry.HintPolicy{RemainingHeader: "X-RateLimit-Remaining"}},
			"f.example.com":    {Hints: httpretry.HintPolicy{ResetHeader: "X-Reset", RemainingHeader: "bad header"}},
			"ok.example.com":   {Overload: httpretry.OverloadPolicy{Disabled: true, ThrottleK: 1.1}},
		},
	}
	err := tr.Validate()
	require.Error(t, err)
	for _, want := range []string{
		`Transport.Policy.Overload.ThrottleK: 0.5 is not a finite number of at least 1`,
		`Transport.Policy.Overload.ThrottleWindow: -1s is negative`,
		`Transport.Hosts["a.example.com"].Overload.LimitMax: -1 is negative`,
		`Transport.Hosts["a.example.com"].Overload.LimitMin: -2 is negative`,
		`Transport.Hosts["b.example.com"].Overload.LimitMin: 20 is above LimitMax (10)`,
		`Transport.Hosts["c.example.com"].Overload.ThrottleK: is set but Throttle is off`,
		`Transport.Hosts["c.example.com"].Overload.LimitQueue: is set but Limit is off`,
		`Transport.Hosts["c.example.com"].Overload.PaceFailFast: is set but Pace is off`,
		`Transport.Hosts["d.example.com/v1"].Overload: is per host`,
		`Transport.Hosts["e.example.com"].Hints.RemainingHeader: is read only with ResetHeader`,
		`Transport.Hosts["f.example.com"].Hints.RemainingHeader: "bad header" is not a valid header name`,
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 11)
	assert.NotContains(t, err.Error(), "ok.example.com")
}

// TestOverloadStateIsBounded: hosts whose controls are back at rest are
// dropped, so memory follows the hosts in trouble, not every host ever
// called; a host still throttled keeps its state.
func TestOverloadStateIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Host == "sick.example.com" {
				return nil, errors.Join(httpretry.ErrAttemptTimeout) // a timeout: overload
			}
			return fake.RoundTrip(req)
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 1,
			Overload: httpretry.OverloadPolicy{Throttle: true, Limit: true, Pace: true, ThrottleWindow: 10 * time.Minute}}}
		call := func(host string) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/", nil)
			require.NoError(t, err)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		for i := range 500 {
			call("h" + strconv.Itoa(i) + ".example.com")
		}
		call("sick.example.com")
		assert.Len(t, tr.Stats(), 501)
		time.Sleep(2 * time.Minute)
		call("new.example.com") // a new host's state sweeps the table
		var hosts []string
		for _, s := range tr.Stats() {
			hosts = append(hosts, s.Host)
		}
		assert.Equal(t, []string{"new.example.com:443", "sick.example.com:443"}, hosts)
	})
}
