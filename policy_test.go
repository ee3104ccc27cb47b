package httpretry_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestHostSelection(t *testing.T) {
	t.Parallel()
	zero := backoff.Constant(0)
	hosts := map[string]httpretry.Policy{
		"api.example.com:8443": {MaxAttempts: 2, Backoff: zero},
		"API.example.com":      {MaxAttempts: 3, Backoff: zero},
		"*.example.com":        {MaxAttempts: 4, Backoff: zero},
		"*.eu.example.com":     {MaxAttempts: 5, Backoff: zero},
		"*.example.com:8443":   {MaxAttempts: 6, Backoff: zero},
		"[::1]:9000":           {MaxAttempts: 7, Backoff: zero},
		"10.0.0.1":             {MaxAttempts: 8, Backoff: zero},
		"pay.example.com:443":  {MaxAttempts: 9, Backoff: zero},
	}
	cases := []struct {
		url  string
		want int
	}{
		{"https://api.example.com:8443/x", 2}, // host:port beats host
		{"https://api.example.com/x", 3},      // host (keys are case-insensitive)
		{"https://API.EXAMPLE.COM:9999/x", 3}, // host with another port
		{"https://www.example.com/x", 4},      // wildcard
		{"https://a.b.example.com/x", 4},      // wildcard at any depth
		{"https://x.eu.example.com/x", 5},     // the longest suffix wins
		{"https://www.example.com:8443/x", 6}, // at equal suffix, the one with a port
		{"https://example.com/x", 1},          // a wildcard does not match its apex
		{"https://badexample.com/x", 1},       // nor a name that merely ends alike
		{"http://[::1]:9000/x", 7},            // IPv6
		{"http://10.0.0.1:8080/x", 8},         // IP without port matches any port
		{"https://pay.example.com/x", 9},      // default port for the scheme
		{"http://pay.example.com/x", 4},       // port 80 is not 443: falls to the wildcard
		{"https://other.test/x", 1},           // Transport.Policy
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			// Each policy has its own MaxAttempts: the count of attempts
			// names the one the URL got.
			tr := &httpretry.Transport{Hosts: hosts, Policy: httpretry.Policy{MaxAttempts: 1}}
			assert.Equal(t, tc.want, attemptsFor(t, tr, tc.url))
		})
	}
}

func TestInvalidConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tr     *httpretry.Transport
		inText string
	}{
		{"negative MaxAttempts", &httpretry.Transport{Policy: httpretry.Policy{MaxAttempts: -1}}, "Transport.Policy.MaxAttempts: -1 is negative"},
		{"negative MaxRetryAfter", &httpretry.Transport{Policy: httpretry.Policy{MaxRetryAfter: -1}}, "MaxRetryAfter"},
		{"bad backoff", &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Exponential{Base: time.Second, Cap: time.Millisecond}}}, "cap"},
		{"bad attempt header", &httpretry.Transport{Policy: httpretry.Policy{AttemptHeader: "x attempt"}}, "AttemptHeader"},
		{"bad key header", &httpretry.Transport{Policy: httpretry.Policy{Keys: httpretry.KeyPolicy{Header: "a:b"}}}, "Keys.Header"},
		{"bad key method", &httpretry.Transport{Policy: httpretry.Policy{Keys: httpretry.KeyPolicy{Methods: []string{"PO ST"}}}}, "Keys.Methods"},
		{"a URL as a host key", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"https://api.example.com": {}}}, "not a URL"},
		{"a lone star", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"*": {}}}, "Transport.Policy"},
		{"a star inside", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"api.*.com": {}}}, "wildcard"},
		{"an empty key", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"": {}}}, "empty"},
		{"a bad port", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"api.example.com:99999": {}}}, "port"},
		{"a duplicate after case folding", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"a.com": {}, "A.com": {}}}, "same host"},
		{"a bad policy under a host", &httpretry.Transport{Hosts: map[string]httpretry.Policy{"a.com": {MaxAttempts: -3}}}, `Hosts["a.com"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := httpretrytest.NewScript(httpretrytest.Status(200))
			tc.tr.Base = fake
			body := httpretrytest.NewBody("x")
			req, _ := http.NewRequest(http.MethodPost, site, body)
			resp, err := tc.tr.RoundTrip(req)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
			assert.ErrorContains(t, err, tc.inText)
			assert.Empty(t, fake.Requests(), "nothing is sent")
			assert.Equal(t, 1, body.Closes())
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*http.Request)
		base   bool // set a custom Base (the scheme is then the Base's business)
	}{
		{name: "nil URL", mutate: func(r *http.Request) { r.URL = nil }},
		{name: "no host", mutate: func(r *http.Request) { r.URL = &url.URL{Scheme: "https", Path: "/x"} }},
		{name: "unsupported scheme", mutate: func(r *http.Request) { r.URL.Scheme = "ftp" }},
		{name: "bad method", mutate: func(r *http.Request) { r.Method = "GE T" }},
		{name: "bad header name", mutate: func(r *http.Request) { r.Header["X Bad"] = []string{"v"} }},
		{name: "bad header value", mutate: func(r *http.Request) { r.Header.Set("X-Bad", "a\r\nInjected: 1") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := httpretrytest.NewBody("x")
			req, _ := http.NewRequest(http.MethodPost, site, body)
			tc.mutate(req)
			resp, err := (&httpretry.Transport{}).RoundTrip(req)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, httpretry.ErrInvalidRequest)
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, httpretry.StopInvalid, re.Stop)
			assert.Zero(t, re.Attempts)
			assert.Equal(t, 1, body.Closes())
		})
	}
	t.Run("nil request", func(t *testing.T) {
		_, err := (&httpretry.Transport{}).RoundTrip(nil)
		assert.ErrorIs(t, err, httpretry.ErrInvalidRequest)
	})
}

func FuzzHostPattern(f *testing.F) {
	for _, s := range []string{"api.example.com", "api.example.com:8443", "*.example.com", "[::1]:80", "*", "a.*.b", "x:y:z", "*.", "..", "A.B:0"} {
		f.Add(s, "api.example.com:8443")
	}
	f.Fuzz(func(t *testing.T, pattern, host string) {
		u := &url.URL{Scheme: "https", Host: host, Path: "/"}
		tr := &httpretry.Transport{
			Base: httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
			}),
			Hosts: map[string]httpretry.Policy{pattern: {MaxAttempts: 2}},
		}
		resp, err := tr.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}})
		if (resp == nil) == (err == nil) {
			t.Fatalf("want exactly one of response and error, got %v, %v", resp, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "httpretry: ") {
			t.Fatalf("error without prefix: %v", err)
		}
	})
}
