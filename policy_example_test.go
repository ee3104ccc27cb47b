package httpretry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// One client, many call sites: a call whose context says so gets exactly
// one attempt; the others keep the policy.
func ExampleWithoutRetries() {
	upstream := httpretrytest.NewScript(httpretrytest.Status(503))
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   upstream,
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
	}}

	ctx := httpretry.WithoutRetries(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/healthz", nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", len(upstream.Requests()), "attempt")
	// Output: 503 after 1 attempt
}

// WithPolicy edits the policy that would apply to the request, for the
// calls made with its context: here one call site, a checkout, gives up
// sooner than the client's policy would, and another raises the longest
// Retry-After it will wait out (a batch job can wait where a user cannot).
func ExampleWithPolicy() {
	upstream := httpretrytest.NewScript(httpretrytest.Status(503))
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   upstream,
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
	}}

	checkout := httpretry.WithPolicy(context.Background(), func(p *httpretry.Policy) {
		p.MaxAttempts = min(p.MaxAttempts, 2) // p holds the policy that applies, defaults filled in
	})
	batch := httpretry.WithPolicy(context.Background(), func(p *httpretry.Policy) {
		p.MaxRetryAfter = 10 * time.Minute
	})
	for _, ctx := range []context.Context{checkout, batch} {
		before := len(upstream.Requests())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/orders", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "after", len(upstream.Requests())-before, "attempts")
	}
	// Output:
	// 503 after 2 attempts
	// 503 after 4 attempts
}

// Validate reports every invalid key and setting at once, with its field
// path: call it at start-up to fail fast.
func ExampleTransport_Validate() {
	tr := &httpretry.Transport{
		Policy: httpretry.Policy{MaxAttempts: -1},
		Hosts: map[string]httpretry.Policy{
			"https://api.example.com":  {},
			"api.example.com/v1/batch": {Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5}},
		},
	}
	if err := tr.Validate(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// httpretry: invalid policy: Transport.Policy.MaxAttempts: -1 is negative
	// httpretry: invalid policy: Transport.Hosts["api.example.com/v1/batch"].Breaker: is per host: set it on the key without the path
	// httpretry: invalid policy: Transport.Hosts["https://api.example.com"]: a key is "host", "host:port" or "*.suffix", optionally followed by a path prefix such as "/v1/search", not a URL
}

// Keys with a path prefix set policies per endpoint: keyed POSTs with few
// attempts on one path, hedged GETs on another, of one host. The host
// chooses first, then the longest prefix.
func ExampleTransport_paths() {
	upstream := httpretrytest.NewScript(httpretrytest.Status(503))
	client := &http.Client{Transport: &httpretry.Transport{
		Base: upstream,
		Hosts: map[string]httpretry.Policy{
			"api.example.com":            {MaxAttempts: 3, Backoff: backoff.Constant(time.Millisecond)},
			"api.example.com/v1/charges": {MaxAttempts: 2}, // inherits the host's backoff
		},
	}}
	for _, path := range []string{"/v1/charges", "/v1/charges/ch_1/refunds", "/v1/search"} {
		before := len(upstream.Requests())
		resp, err := client.Get("https://api.example.com" + path)
		if err != nil {
			fmt.Println(err)
			continue
		}
		resp.Body.Close()
		fmt.Println(path, len(upstream.Requests())-before, "attempts")
	}
	// Output:
	// /v1/charges 2 attempts
	// /v1/charges/ch_1/refunds 2 attempts
	// /v1/search 3 attempts
}

// A JSON API that answers 200 with "try again" in its body, and whose
// connections sometimes die mid-body: with ReadBodyBytes, the body is
// read inside its attempt, so Classify can read it and a cut body is
// retried (here a keyed POST, sent again with its key). The caller still
// reads the whole body.
func ExamplePolicy_readBodyBytes() {
	upstream := httpretrytest.NewScript(
		httpretrytest.Respond(200, `{"status":"try again"}`),
		httpretrytest.Respond(200, `{"id":"ch_1","status":"ok"}`).FailAfter(8, nil),
		httpretrytest.Respond(200, `{"id":"ch_1","status":"ok"}`),
	)
	client := &http.Client{Transport: &httpretry.Transport{
		Base: upstream,
		Policy: httpretry.Policy{
			Backoff:       backoff.Constant(time.Millisecond),
			ReadBodyBytes: 64 << 10, // JSON answers; a larger body streams as usual
			Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
				var s struct{ Status string }
				if resp != nil && json.NewDecoder(resp.Body).Decode(&s) == nil && s.Status == "try again" {
					return httpretry.ClassTransient
				}
				return httpretry.ClassDefault
			},
		},
	}}

	resp, err := client.Post("https://api.example.com/v1/charges", "application/json", strings.NewReader(`{"amount":1999}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body), "after", len(upstream.Requests()), "attempts")
	// Output: {"id":"ch_1","status":"ok"} after 3 attempts
}

// A region that fails: the retry of a payment goes to the next endpoint,
// with the same Idempotency-Key, and the answer comes from there.
func ExamplePolicy_endpoints() {
	upstream := httpretrytest.NewScript(httpretrytest.Status(201)).On(
		func(req *http.Request) bool { return req.URL.Host == "api.eu.example.com" },
		httpretrytest.Status(503))
	client := &http.Client{Transport: &httpretry.Transport{
		Base: upstream,
		Hosts: map[string]httpretry.Policy{"api.eu.example.com": {
			Backoff:   backoff.Constant(time.Millisecond),
			Endpoints: []string{"api.us.example.com"},
		}},
	}}

	resp, err := client.Post("https://api.eu.example.com/v1/payments", "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	reqs := upstream.Requests()
	for _, r := range reqs {
		fmt.Println(r.URL.Host, r.Status)
	}
	fmt.Println("same key:", reqs[0].Key == reqs[1].Key)
	// Output:
	// api.eu.example.com 503
	// api.us.example.com 201
	// same key: true
}
