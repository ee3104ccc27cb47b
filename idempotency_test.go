package httpretry_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		method   string
		header   http.Header
		keys     httpretry.KeyPolicy
		wantName string            // header expected on every attempt, "" for none
		check    func(string) bool // the key's value
		attempts int
	}{
		{name: "POST gets a bare UUIDv4", method: "POST", wantName: "Idempotency-Key",
			check: uuidV4.MatchString, attempts: 3},
		{name: "PUT gets one", method: "PUT", wantName: "Idempotency-Key", check: uuidV4.MatchString, attempts: 3},
		{name: "GET gets none", method: "GET", attempts: 3},
		{name: "DELETE gets none", method: "DELETE", attempts: 3},
		{name: "PATCH gets none and is not retried", method: "PATCH", attempts: 1},
		{name: "caller's key is kept", method: "POST", header: http.Header{"Idempotency-Key": {"order-42"}},
			wantName: "Idempotency-Key", check: func(v string) bool { return v == "order-42" }, attempts: 3},
		{name: "caller's X-Idempotency-Key counts", method: "PATCH", header: http.Header{"X-Idempotency-Key": {"k"}},
			wantName: "X-Idempotency-Key", check: func(v string) bool { return v == "k" }, attempts: 3},
		{name: "quoted", method: "POST", keys: httpretry.KeyPolicy{Quoted: true}, wantName: "Idempotency-Key",
			check: func(v string) bool { return v[0] == '"' && uuidV4.MatchString(strings.Trim(v, `"`)) }, attempts: 3},
		{name: "custom header, generator and methods", method: "PATCH",
			keys:     httpretry.KeyPolicy{Header: "X-Request-Token", Methods: []string{"patch"}, New: func() string { return `a"b` }, Quoted: true},
			wantName: "X-Request-Token", check: func(v string) bool { return v == `"a\"b"` }, attempts: 3},
		{name: "disabled: POST is not retried after it reached the server", method: "POST",
			keys: httpretry.KeyPolicy{Disabled: true}, attempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(502), httpretrytest.Status(201))
				tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Keys: tc.keys}}
				req, err := http.NewRequestWithContext(t.Context(), tc.method, site, strings.NewReader(`{"amount":100}`))
				require.NoError(t, err)
				for k, v := range tc.header {
					req.Header[k] = v
				}
				before := req.Header.Clone()
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, before, req.Header, "the caller's headers are untouched")
				seen := fake.Requests()
				require.Len(t, seen, tc.attempts)
				for _, s := range seen {
					assert.Equal(t, `{"amount":100}`, string(s.Body), "the same body on every attempt")
					if tc.wantName == "" {
						assert.Empty(t, s.Header.Values("Idempotency-Key"))
						continue
					}
					vs := s.Header.Values(tc.wantName)
					require.Len(t, vs, 1)
					assert.True(t, tc.check(vs[0]), "key %q", vs[0])
					assert.Equal(t, seen[0].Header.Get(tc.wantName), vs[0], "one key per logical request")
				}
			})
		})
	}
}

func TestKeysDifferAcrossRequests(t *testing.T) {
	t.Parallel()
	fake := httpretrytest.NewScript(httpretrytest.Status(200))
	tr := &httpretry.Transport{Base: fake}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, site, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	seen := fake.Requests()
	assert.NotEqual(t, seen[0].Header.Get("Idempotency-Key"), seen[1].Header.Get("Idempotency-Key"))
}

func TestBadKeyGenerator(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"", "a\nb"} {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Keys: httpretry.KeyPolicy{New: func() string { return k }}}}
		body := httpretrytest.NewBody("x")
		req, _ := http.NewRequest(http.MethodPost, site, body)
		_, err := tr.RoundTrip(req)
		assert.ErrorContains(t, err, "Keys.New")
		assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy, "a generator that returns no key is a configuration error")
		assert.Empty(t, fake.Requests())
		assert.Equal(t, 1, body.Closes())

		bodiless, _ := http.NewRequest(http.MethodPost, site, nil)
		_, err = tr.RoundTrip(bodiless)
		assert.ErrorContains(t, err, "Keys.New")
	}
}

func TestAttemptHeader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{AttemptHeader: "x-attempt", Backoff: backoff.Constant(0)}}
		req := get(t, t.Context())
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		for i, s := range fake.Requests() {
			assert.Equal(t, []string{string(rune('1' + i))}, s.Header["X-Attempt"])
		}
		assert.Empty(t, req.Header)
	})
}

// TestCustomKeyHeaderCountsEverywhere: a request carrying the key under
// the configured Keys.Header is keyed for every rule, a 409 being
// transient included.
func TestCustomKeyHeaderCountsEverywhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(409), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0),
			Keys:    httpretry.KeyPolicy{Header: "X-Request-Key"},
		}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, site, strings.NewReader("x"))
		req.Header.Set("X-Request-Key", "caller-key")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, "409 on a keyed request is retried")
		require.Len(t, fake.Requests(), 2)
		for _, s := range fake.Requests() {
			assert.Equal(t, "caller-key", s.Header.Get("X-Request-Key"))
			assert.Empty(t, s.Header.Get("Idempotency-Key"), "the caller's key is not doubled")
		}
	})
}

// TestAttemptHeaderMustNotBeAKeyHeader: an AttemptHeader that names a key
// header would overwrite every key with "1", "2", …, so that different
// POSTs share keys: it is a configuration error.
func TestAttemptHeaderMustNotBeAKeyHeader(t *testing.T) {
	t.Parallel()
	for _, p := range []httpretry.Policy{
		{AttemptHeader: "Idempotency-Key"},
		{AttemptHeader: "x-idempotency-key"},
		{AttemptHeader: "X-Key", Keys: httpretry.KeyPolicy{Header: "x-key"}},
	} {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Policy: p}
		assert.ErrorIs(t, tr.Validate(), httpretry.ErrInvalidPolicy)
		assert.ErrorContains(t, tr.Validate(), "Transport.Policy.AttemptHeader")
		req, _ := http.NewRequest(http.MethodPost, site, strings.NewReader("x"))
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
		assert.Empty(t, fake.Requests())
	}
	// Inherited halves conflict too: the entry that combines them is named.
	tr := &httpretry.Transport{Policy: httpretry.Policy{AttemptHeader: "X-Key"},
		Hosts: map[string]httpretry.Policy{"api.example.com": {Keys: httpretry.KeyPolicy{Header: "X-Key"}}}}
	assert.ErrorContains(t, tr.Validate(), `Transport.Hosts["api.example.com"].AttemptHeader`)
}

// Every call gets a key of its own: 10,000 POSTs, 10,000 distinct
// version 4 UUIDs.
func TestIdempotencyKeysAreDistinct(t *testing.T) {
	seen := make(map[string]bool, 10_000)
	tr := &httpretry.Transport{Base: httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		k := req.Header.Get("Idempotency-Key")
		if !uuidV4.MatchString(k) || seen[k] {
			t.Fatalf("key %q: not a version 4 UUID, or seen before", k)
		}
		seen[k] = true
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})}
	for range 10_000 {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/charges", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}
