// Stripe runs stripe-go over httpretry against a local fake of the Stripe
// API that fails the way a busy upstream does, and prints what each layer
// sent. It needs no network beyond 127.0.0.1.
//
//	cd examples/stripe && go run .
//
// stripe-go retries on its own (MaxNetworkRetries, 2 by default, waits of
// 0.5 s to 5 s). With httpretry under it as well, the two layers multiply:
// 3 SDK tries of 4 attempts each. The recommended setup turns the SDK's
// retries off and lets httpretry retry, with the Idempotency-Key stripe-go
// puts on every POST, which httpretry keeps, and which Stripe deduplicates
// by. docs/sdks.md has the figures.
package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/stripe/stripe-go/v82"
)

// newStripeClient returns a stripe-go client for the API at baseURL whose
// requests go through rt, with stripe-go's own retries off.
func newStripeClient(baseURL string, rt http.RoundTripper) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: &http.Client{
			Timeout:   80 * time.Second, // stripe-go's own default: bounds a call, retries included
			Transport: rt,
		},
		MaxNetworkRetries: stripe.Int64(0), // httpretry retries; 0 turns stripe-go's off
		URL:               stripe.String(baseURL),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient("sk_test_example_not_a_real_key", stripe.WithBackends(backends))
}

// stripePolicy is the retry policy for api.stripe.com.
func stripePolicy() httpretry.Policy {
	return httpretry.Policy{
		// Stripe says in Stripe-Should-Retry whether a failed request is
		// worth retrying (a lock timeout: yes; a replay of a key whose
		// first request failed: no). stripe-go reads it; httpretry must
		// too, now that it retries in the SDK's place.
		Hints: httpretry.HintPolicy{ShouldRetryHeader: "Stripe-Should-Retry"},
		// Keys stay on (the zero KeyPolicy): stripe-go sets its own
		// Idempotency-Key on every POST, which httpretry never replaces,
		// and Stripe deduplicates by it.
	}
}

func main() {
	fake := newFakeStripe()
	srv, fl := fake.start(func(h http.Handler) *faults { return newFaults(h, 1) })
	defer srv.Close()
	ctx := context.Background()

	sc := newStripeClient(srv.URL, &httpretry.Transport{Policy: stripePolicy(), OnAttempt: printAttempt})

	fmt.Println("1. 20 charges while a fifth of the requests fail (10 % 503, 10 % answer lost")
	fmt.Println("   after the charge was made); stripe-go's retries off, httpretry's on")
	fl.set(0.10, 0.10)
	ok := 0
	for i := range 20 {
		_, err := sc.V1Charges.Create(ctx, &stripe.ChargeCreateParams{
			Amount: stripe.Int64(2000), Currency: stripe.String("usd"), Description: stripe.String(fmt.Sprintf("order %d", i)),
		})
		if err == nil {
			ok++
		}
	}
	fmt.Printf("   => %d of 20 calls succeeded; the fake created %d charges, %d of them duplicates\n",
		ok, fake.created(), fake.duplicates())

	fmt.Println("\n2. One charge in a total outage (every request 503)")
	fl.setOutage(true)
	before := fl.requests()
	_, err := sc.V1Charges.Create(ctx, &stripe.ChargeCreateParams{Amount: stripe.Int64(2000), Currency: stripe.String("usd")})
	fmt.Printf("   => %v\n   => %d requests for one call (httpretry's 4 attempts; with stripe-go's\n", err, fl.requests()-before)
	fmt.Println("      retries on as well it would be 3 x 4 = 12)")
}

func printAttempt(a httpretry.Attempt) {
	if a.Err == nil && a.Response.StatusCode < 300 && a.N == 1 {
		return // only the attempts that failed or were retried
	}
	outcome := ""
	if a.Err != nil {
		outcome = a.Err.Error()
	} else {
		outcome = a.Response.Status
	}
	next := "done: " + a.Stop.String()
	if a.Retry {
		next = fmt.Sprintf("retry in %v", a.Delay.Round(time.Millisecond))
	}
	fmt.Printf("   attempt %d %s %s Idempotency-Key: %s -> %s, %s\n", a.N, a.Request.Method, a.Request.URL.Path,
		a.Request.Header.Get("Idempotency-Key"), outcome, next)
}
