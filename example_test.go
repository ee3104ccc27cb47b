package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func Example() {
	// An upstream that answers 503 twice, then 200: an in-memory stand-in
	// from package httpretrytest, as Base. Leave Base nil to use the network.
	upstream := httpretrytest.NewScript(
		httpretrytest.Respond(http.StatusServiceUnavailable, "try again"),
		httpretrytest.Respond(http.StatusServiceUnavailable, "try again"),
		httpretrytest.Respond(http.StatusOK, "hello"),
	)
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   upstream,
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
	}}
	resp, err := client.Get("https://api.example.com/hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", len(upstream.Requests()), "attempts")
	// Output: 200 hello after 3 attempts
}

// Per-host policies: the most specific key wins. Here a stand-in Base
// answers 503 to everything, to show how many attempts each host gets.
func ExampleTransport_hosts() {
	attempts := map[string]int{}
	unavailable := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		attempts[req.URL.Host]++
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody}, nil
	})
	quick := backoff.Constant(time.Millisecond)
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   unavailable,
		Policy: httpretry.Policy{Backoff: quick}, // every other host: 4 attempts
		Hosts: map[string]httpretry.Policy{
			// Payments: few attempts, a generous Retry-After ceiling.
			"payments.example.com": {MaxAttempts: 3, MaxRetryAfter: 2 * time.Minute, Backoff: quick},
			// Internal services: no retries, the caller handles failure.
			"*.internal.example.com": {MaxAttempts: 1},
		},
	}}
	for _, host := range []string{"payments.example.com", "billing.internal.example.com", "api.example.org"} {
		resp, err := client.Get("https://" + host + "/v1/status")
		if err != nil {
			fmt.Println(err)
			continue
		}
		resp.Body.Close()
		fmt.Printf("%s: %d attempts, status %d\n", host, attempts[host], resp.StatusCode)
	}
	// Output:
	// payments.example.com: 3 attempts, status 503
	// billing.internal.example.com: 1 attempts, status 503
	// api.example.org: 4 attempts, status 503
}

// When attempts run out on a response, RoundTrip returns it untouched, so
// the caller still sees the server's answer.
func ExampleTransport_exhausted() {
	upstream := httpretrytest.NewScript(httpretrytest.Respond(http.StatusServiceUnavailable, "try again"))
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   upstream,
		Policy: httpretry.Policy{MaxAttempts: 3, Backoff: backoff.Constant(time.Millisecond)},
	}}
	resp, err := client.Get("https://api.example.com/hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, body)
	// Output: 503 try again
}

// Without any response, the error says how many attempts were made and why
// retrying stopped, and wraps the last cause.
func ExampleRetryError() {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now

	client := &http.Client{Transport: &httpretry.Transport{
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
	}}
	_, err := client.Get(url)
	var re *httpretry.RetryError
	if errors.As(err, &re) {
		fmt.Println(re.Attempts, re.Stop)
	}
	// Output: 4 attempts exhausted
}

// A POST gets an Idempotency-Key, the same on every attempt, so the server
// can apply it once however often it arrives.
func ExampleKeyPolicy() {
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) < 3 {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
	}}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(len(keys), "attempts, one key:", keys[0] == keys[1] && keys[1] == keys[2])
	// Output: 3 attempts, one key: true
}

// A key makes a retried POST safe only on a server that deduplicates by
// it. Per host, then: keys off for the storage services that ignore the
// header, where a POST that may have been applied is then not sent again,
// and PayPal's own header for PayPal. Here every host answers its first
// attempt with a 502, after which the POST may or may not have been applied.
func ExampleKeyPolicy_perHost() {
	attempts := map[string]int{}
	keyHeaders := map[string][]string{}
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		host := req.URL.Host
		attempts[host]++
		keyHeaders[host] = nil
		for _, h := range []string{"Idempotency-Key", "PayPal-Request-Id"} {
			if req.Header.Get(h) != "" {
				keyHeaders[host] = append(keyHeaders[host], h)
			}
		}
		code := http.StatusOK
		if attempts[host] == 1 {
			code = http.StatusBadGateway
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Request: req}, nil
	})
	keysOff := httpretry.KeyPolicy{Disabled: true}
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   base,
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
		Hosts: map[string]httpretry.Policy{
			"*.amazonaws.com":         {Keys: keysOff}, // S3 ignores Idempotency-Key
			"*.blob.core.windows.net": {Keys: keysOff}, // so does Azure Storage
			"api-m.paypal.com":        {Keys: httpretry.KeyPolicy{Header: "PayPal-Request-Id"}},
		},
	}}
	for _, url := range []string{
		"https://api.stripe.com/v1/payment_intents",
		"https://api-m.paypal.com/v2/checkout/orders",
		"https://uploads.s3.us-east-1.amazonaws.com/video.mp4?uploads",
		"https://logs.blob.core.windows.net/app/events.csv?comp=query",
	} {
		resp, err := client.Post(url, "application/json", strings.NewReader(`{}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		host := resp.Request.URL.Host
		fmt.Println(host, resp.StatusCode, "after", attempts[host], "attempt(s), key headers:", keyHeaders[host])
	}
	// Output:
	// api.stripe.com 200 after 2 attempt(s), key headers: [Idempotency-Key]
	// api-m.paypal.com 200 after 2 attempt(s), key headers: [PayPal-Request-Id]
	// uploads.s3.us-east-1.amazonaws.com 502 after 1 attempt(s), key headers: []
	// logs.blob.core.windows.net 502 after 1 attempt(s), key headers: []
}

// Layers under the Transport run once per attempt and can read its number,
// for example to sign each attempt afresh or to tag a trace span.
func ExampleAttemptFromContext() {
	upstream := httpretrytest.NewScript(httpretrytest.Status(http.StatusServiceUnavailable), httpretrytest.Status(http.StatusOK))
	inner := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		n, _ := httpretry.AttemptFromContext(req.Context())
		fmt.Println("sending attempt", n)
		return upstream.RoundTrip(req)
	})
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   inner,
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
	}}
	resp, err := client.Get("https://api.example.com/hello")
	if err == nil {
		resp.Body.Close()
	}
	// Output:
	// sending attempt 1
	// sending attempt 2
}

// Classify lets a caller retry what the built-in rules would not, such as a
// 404 from an eventually consistent read.
func ExamplePolicy_classify() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.NotFound(w, r) // not replicated yet
			return
		}
		io.WriteString(w, "found")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{Policy: httpretry.Policy{
		Backoff: backoff.Constant(time.Millisecond),
		Classify: func(req *http.Request, resp *http.Response, err error) httpretry.Class {
			if resp != nil && resp.StatusCode == http.StatusNotFound && req.Method == http.MethodGet {
				return httpretry.ClassTransient
			}
			return httpretry.ClassDefault
		},
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "attempts")
	// Output: 200 found after 3 attempts
}
