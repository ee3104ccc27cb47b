package httpretry_test

import (
	"errors"
	"net/http"
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

// attemptsFor counts the attempts a GET of rawURL makes against an
// always-503 upstream: each policy below has its own MaxAttempts.
func attemptsFor(t *testing.T, tr *httpretry.Transport, rawURL string) int {
	t.Helper()
	up := httpretrytest.NewScript(httpretrytest.Status(503))
	tr.Base = up
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return len(up.Requests())
}

// TestPathKeys: a key may name a path prefix under its host; the host
// pattern chooses first, then the longest prefix, on segment boundaries.
func TestPathKeys(t *testing.T) {
	t.Parallel()
	zero := backoff.Constant(0)
	hosts := map[string]httpretry.Policy{
		"api.example.com":                 {MaxAttempts: 2, Backoff: zero},
		"api.example.com/v1/search":       {MaxAttempts: 3},
		"api.example.com/v1/search/fuzzy": {MaxAttempts: 4},
		"api.example.com/v1/charges/":     {MaxAttempts: 5},
		"*.example.com/v1/search":         {MaxAttempts: 6, Backoff: zero},
		"paths.example.com/v2":            {MaxAttempts: 7, Backoff: zero},
	}
	cases := []struct {
		url  string
		want int
	}{
		{"https://api.example.com/", 2},
		{"https://api.example.com/v1/search", 3},
		{"https://api.example.com/v1/search?q=x", 3},        // the query is not the path
		{"https://api.example.com/v1/search/", 3},           // below the prefix
		{"https://api.example.com/v1/searches", 2},          // not on a segment boundary
		{"https://api.example.com/v1/search/fuzzy/deep", 4}, // the longest prefix wins
		{"https://api.example.com/v1/charges", 5},           // a trailing slash in the key is ignored
		{"https://api.example.com/V1/search", 2},            // paths are case-sensitive
		{"https://www.example.com/v1/search", 6},            // a wildcard's path
		{"https://www.example.com/other", 1},                // no key matches: Transport.Policy
		{"https://paths.example.com/v2/x", 7},
		{"https://paths.example.com/v3", 1}, // a host with only path keys falls through
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				tr := &httpretry.Transport{Hosts: hosts, Policy: httpretry.Policy{MaxAttempts: 1}}
				assert.Equal(t, tc.want, attemptsFor(t, tr, tc.url))
			})
		})
	}
}

// TestInheritance: a Hosts entry inherits every field it leaves zero from
// Transport.Policy, and a path key from its host's entry; sub-policies are
// inherited or replaced as a whole; a negative AttemptTimeout turns an
// inherited one off.
func TestInheritance(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got []httpretry.Attempt
		config := httpretry.Transport{
			Policy: httpretry.Policy{
				MaxAttempts:    3,
				Backoff:        backoff.Constant(time.Second),
				AttemptTimeout: 2 * time.Second,
				AttemptHeader:  "X-Attempt",
				Keys:           httpretry.KeyPolicy{Header: "X-Key"},
			},
			Hosts: map[string]httpretry.Policy{
				"api.example.com":           {MaxAttempts: 2},                                   // inherits Backoff, AttemptTimeout, headers, keys
				"api.example.com/v1/export": {AttemptTimeout: -1, Backoff: backoff.Constant(0)}, // inherits MaxAttempts 2 from its host
				"keys.example.com":          {Keys: httpretry.KeyPolicy{Disabled: true}},
			},
			OnAttempt: func(a httpretry.Attempt) { got = append(got, a) },
		}
		hang := httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		send := func(method, url string, outcomes ...httpretrytest.Outcome) []httpretrytest.Request {
			got = got[:0]
			up := httpretrytest.NewScript(outcomes...)
			tr := &httpretry.Transport{Base: up, Policy: config.Policy, Hosts: config.Hosts, OnAttempt: config.OnAttempt}
			req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			_ = err
			return up.Requests()
		}

		reqs := send(http.MethodPost, "https://api.example.com/v1/charges", hang)
		require.Len(t, reqs, 2, "the host's MaxAttempts")
		assert.Equal(t, time.Second, reqs[1].Time.Sub(reqs[0].Time)-2*time.Second, "inherited backoff, after the inherited 2 s attempt timeout")
		assert.Equal(t, "2", reqs[1].Header.Get("X-Attempt"), "inherited AttemptHeader")
		assert.NotEmpty(t, reqs[0].Header.Get("X-Key"), "inherited key header")
		assert.Equal(t, reqs[0].Header.Get("X-Key"), reqs[1].Header.Get("X-Key"))

		start := time.Now()
		reqs = send(http.MethodGet, "https://api.example.com/v1/export", httpretrytest.Status(503), httpretrytest.Func(func(*http.Request) (*http.Response, error) {
			time.Sleep(time.Minute) // longer than the inherited timeout, which is off here
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		}))
		require.Len(t, reqs, 2, "MaxAttempts inherited from the host's entry")
		assert.Equal(t, time.Minute, time.Since(start), "no attempt timeout, no backoff")
		assert.Equal(t, httpretry.StopSuccess, got[1].Stop)

		reqs = send(http.MethodPost, "https://keys.example.com/", httpretrytest.Status(200))
		require.Len(t, reqs, 1)
		assert.Empty(t, reqs[0].Header.Get("X-Key"), "Keys replaced as a whole: disabled")
		assert.Equal(t, "1", reqs[0].Header.Get("X-Attempt"))
	})
}

// TestValidateListsEveryError: Validate names every invalid key and field
// at once, with its path, and RoundTrip fails with the same errors.
func TestValidateListsEveryError(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{
		Policy: httpretry.Policy{MaxAttempts: -1, Hedge: httpretry.HedgePolicy{MaxHedges: -2}},
		Hosts: map[string]httpretry.Policy{
			"https://api.example.com":  {},
			"a.example.com":            {MaxRetryAfter: -time.Second, AttemptHeader: "bad header"},
			"a.example.com/v1":         {NewBudget: httpretry.NoBudget},
			"b.example.com":            {Breaker: httpretry.BreakerPolicy{OpenFor: time.Second}},
			"c.example.com":            {Breaker: httpretry.BreakerPolicy{FailureRatio: 2}},
			"d.example.com/v1?x=1":     {},
			"e.example.com":            {Backoff: backoff.Exponential{Base: time.Second, Cap: time.Millisecond}},
			"f.example.com":            {},
			"F.example.com":            {},
			"g.example.com:99999":      {},
			"ok.example.com/v1/search": {MaxAttempts: 2},
		},
	}
	err := tr.Validate()
	require.Error(t, err)
	for _, want := range []string{
		`Transport.Policy.MaxAttempts: -1 is negative`,
		`Transport.Policy.Hedge.MaxHedges: -2 is negative`,
		`Transport.Hosts["https://api.example.com"]: a key is "host"`,
		`Transport.Hosts["a.example.com"].MaxRetryAfter: -1s is negative`,
		`Transport.Hosts["a.example.com"].AttemptHeader: "bad header" is not a valid header name`,
		`Transport.Hosts["a.example.com/v1"].NewBudget: is per host`,
		`Transport.Hosts["b.example.com"].Breaker: no trip rule`,
		`Transport.Hosts["c.example.com"].Breaker.FailureRatio: 2 is not in [0, 1]`,
		`Transport.Hosts["d.example.com/v1?x=1"]: a path prefix has no query`,
		`Transport.Hosts["e.example.com"].Backoff: cap 1ms below base 1s`,
		`same host and path as another key`,
		`Transport.Hosts["g.example.com:99999"]: bad port`,
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.NotContains(t, err.Error(), "ok.example.com")
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		assert.ErrorIs(t, e, httpretry.ErrInvalidPolicy, "%v", e)
	}
	assert.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 12)

	// Each carries its path as data, so a config format can name it in
	// its own words without reading the text.
	var paths [][]string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *httpretry.PolicyError
		require.True(t, errors.As(e, &pe), "%v", e)
		paths = append(paths, pe.Path)
	}
	assert.Contains(t, paths, []string{"Policy", "Hedge", "MaxHedges"})
	assert.Contains(t, paths, []string{"Hosts", "c.example.com", "Breaker", "FailureRatio"})
	assert.Contains(t, paths, []string{"Hosts", "https://api.example.com"})

	resp, rerr := tr.RoundTrip(get(t, t.Context()))
	assert.Nil(t, resp)
	assert.ErrorIs(t, rerr, httpretry.ErrInvalidPolicy)
	var re *httpretry.RetryError
	require.True(t, errors.As(rerr, &re))
	assert.Equal(t, httpretry.StopInvalid, re.Stop)

	assert.NoError(t, (&httpretry.Transport{}).Validate(), "the zero Transport is valid")
}

// A PolicyError's message names the settings it mentions through the
// namer it is given, and an index in its path is a number.
func TestPolicyErrorNamesSettings(t *testing.T) {
	t.Parallel()
	err := (&httpretry.Transport{Hosts: map[string]httpretry.Policy{
		"*":             {},
		"":              {},
		"a.example.com": {Breaker: httpretry.BreakerPolicy{OpenFor: time.Second}, Keys: httpretry.KeyPolicy{Methods: []string{"POST", "GE T"}}},
	}}).Validate()
	require.Error(t, err)
	byPath := map[string]*httpretry.PolicyError{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *httpretry.PolicyError
		require.True(t, errors.As(e, &pe))
		byPath[strings.Join(pe.Path, "/")] = pe
	}
	upper := func(path []string) string { return strings.ToUpper(strings.Join(path, "/")) }
	require.Contains(t, byPath, "Hosts/*")
	assert.Equal(t, `"*" matches every host: set POLICY instead`, byPath["Hosts/*"].Message(upper))
	assert.EqualError(t, byPath["Hosts/*"], `httpretry: invalid policy: Transport.Hosts["*"]: "*" matches every host: set Transport.Policy instead`)
	require.Contains(t, byPath, "Hosts/a.example.com/Breaker")
	assert.Equal(t, "no trip rule: set HOSTS/A.EXAMPLE.COM/BREAKER/CONSECUTIVEFAILURES or HOSTS/A.EXAMPLE.COM/BREAKER/FAILURERATIO (or HOSTS/A.EXAMPLE.COM/BREAKER/DISABLED)",
		byPath["Hosts/a.example.com/Breaker"].Message(upper))
	require.Contains(t, byPath, "Hosts/a.example.com/Keys/Methods/1")
	assert.EqualError(t, byPath["Hosts/a.example.com/Keys/Methods/1"], `httpretry: invalid policy: Transport.Hosts["a.example.com"].Keys.Methods[1]: "GE T" is not a valid method`)
	require.Contains(t, byPath, "Hosts/", "an empty key is a Hosts entry's, not Transport.Policy's")
	assert.EqualError(t, byPath["Hosts/"], `httpretry: invalid policy: Transport.Hosts[""]: empty host pattern`)
}
