package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82"
)

// A layout is one way of stacking the retry layers.
type layout struct {
	name string
	// sdkRetries is stripe-go's MaxNetworkRetries; httpretry is whether
	// its Transport is under the SDK.
	sdkRetries int64
	httpretry  bool
}

var (
	sdkOnly     = layout{"stripe-go's retries only (its default)", 2, false}
	bothLayers  = layout{"both layers on", 2, true}
	recommended = layout{"recommended: httpretry only", 0, true}
)

// client returns a stripe-go client for the fake at url, stacked as l says,
// with no waits between retries: httpretry's backoff is 0 and stripe-go's
// sleeps (0.5 s to 5 s) are off, through the switch it keeps for its own
// tests. Neither changes how many requests are sent. The recommended
// layout is newStripeClient itself.
func (l layout) client(url string) *stripe.Client {
	rt := &httpretry.Transport{Policy: stripePolicy()}
	rt.Policy.Backoff = backoff.Constant(0)
	if l == recommended {
		return newStripeClient(url, rt)
	}
	var base http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if l.httpretry {
		base = rt
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		HTTPClient:        &http.Client{Timeout: 80 * time.Second, Transport: base},
		MaxNetworkRetries: stripe.Int64(l.sdkRetries),
		URL:               stripe.String(url),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	b.(*stripe.BackendImplementation).SetNetworkRetriesSleep(false)
	return stripe.NewClient("sk_test_example_not_a_real_key", stripe.WithBackends(&stripe.Backends{API: b}))
}

// figures is what one layout did over a run of calls.
type figures struct {
	calls, ok, requests, duplicates int
	first                           int // requests of the first call
}

func (f figures) String() string {
	return fmt.Sprintf("%d/%d calls succeeded (%.1f %%), %.2f requests per call (%d for the first), %d duplicate charges",
		f.ok, f.calls, 100*float64(f.ok)/float64(f.calls), float64(f.requests)/float64(f.calls), f.first, f.duplicates)
}

// run makes n charges through l against a fresh fake whose faults are set
// by fail, one call after the other, so that a seed gives the same faults.
func run(t *testing.T, l layout, n int, fail func(*faults)) figures {
	t.Helper()
	fake := newFakeStripe()
	srv, fl := fake.start(func(h http.Handler) *faults { return newFaults(h, 7) })
	t.Cleanup(srv.Close)
	fail(fl)
	sc := l.client(srv.URL)
	f := figures{calls: n}
	for i := range n {
		_, err := sc.V1Charges.Create(context.Background(), &stripe.ChargeCreateParams{
			Amount: stripe.Int64(2000), Currency: stripe.String("usd"), Description: stripe.String(fmt.Sprintf("order %d", i)),
		})
		if err == nil {
			f.ok++
		}
		if i == 0 {
			f.first = fl.requests()
		}
	}
	f.requests, f.duplicates = fl.requests(), fake.duplicates()
	return f
}

// TestFigures measures the figures of docs/sdks.md:
//
//	cd examples/stripe && go test -run TestFigures -v
func TestFigures(t *testing.T) {
	t.Parallel()
	layouts := []layout{sdkOnly, bothLayers, recommended}

	t.Run("a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 300, func(f *faults) { f.set(0.10, 0.10) })
			t.Logf("10 %% 503, 10 %% answer lost: %-40s %v", l.name, got[l])
		}
		r := got[recommended]
		assert.GreaterOrEqual(t, r.ok, 297, "at least 99 %% of the calls succeed")
		assert.Zero(t, r.duplicates, "Stripe deduplicates by the key every attempt carries")
		assert.Zero(t, got[bothLayers].duplicates)
	})

	t.Run("total outage", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 20, func(f *faults) { f.setOutage(true) })
			t.Logf("every request 503: %-40s %v", l.name, got[l])
		}
		r := got[recommended]
		assert.Zero(t, r.ok)
		assert.LessOrEqual(t, r.requests, 4*r.calls, "at most httpretry's MaxAttempts (4) per call")
		assert.Equal(t, 3*r.calls, got[sdkOnly].requests, "stripe-go alone: 1 + MaxNetworkRetries")
		assert.Equal(t, 3*4, got[bothLayers].first, "the layers multiply: 3 SDK tries of 4 attempts")
		// Until httpretry's retry budget runs dry, that is: 500 tokens, 5
		// a retry, so 100 retries in all for the host, then 1 attempt per try.
		assert.Equal(t, 3*r.calls+100, got[bothLayers].requests)
	})
}

// TestOneKeyPerCharge: stripe-go puts its own Idempotency-Key on every
// POST before httpretry sees it, and httpretry never replaces a caller's
// key, so every attempt of one charge, of either layer, carries stripe-go's
// key, once: the two do not conflict.
func TestOneKeyPerCharge(t *testing.T) {
	t.Parallel()
	stripeKey := regexp.MustCompile(`^\d+_[A-Za-z0-9_-]{6}$`) // stripe.NewIdempotencyKey's shape
	for _, l := range []layout{recommended, bothLayers} {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeStripe()
			srv, fl := fake.start(func(h http.Handler) *faults { return newFaults(h, 7) })
			t.Cleanup(srv.Close)
			sc := l.client(srv.URL)
			ctx := context.Background()

			fl.setOutage(true)
			_, err := sc.V1Charges.Create(ctx, &stripe.ChargeCreateParams{
				Amount: stripe.Int64(500), Currency: stripe.String("usd"), Description: stripe.String("generated"),
			})
			require.Error(t, err)
			params := &stripe.ChargeCreateParams{
				Amount: stripe.Int64(500), Currency: stripe.String("usd"), Description: stripe.String("own"),
			}
			params.SetIdempotencyKey("order-42")
			_, err = sc.V1Charges.Create(ctx, params)
			require.Error(t, err)
			fl.set(0, 0)
			_, err = sc.V1Charges.Create(ctx, params)
			require.NoError(t, err, "the same key, once the outage is over")

			generated := fake.keysSeen("generated")
			require.GreaterOrEqual(t, len(generated), 4)
			assert.Regexp(t, stripeKey, generated[0], "stripe-go's key, not httpretry's UUID")
			for _, k := range generated {
				assert.Equal(t, generated[0], k, "one key, one value, on every attempt")
			}
			own := fake.keysSeen("own")
			require.Greater(t, len(own), len(generated))
			for _, k := range own {
				assert.Equal(t, "order-42", k)
			}
			assert.Equal(t, 1, fake.created())
		})
	}
}
