// Testing shows the two ways to meet an upstream's failures before
// production does.
//
// In tests (payments_test.go): the application's own client of a payments
// API, tested under testing/synctest against the fake upstreams of package
// httpretrytest, with the checks it provides.
//
// In staging (this program): a rehearsal that sends charges through the
// same client, over package chaos, which answers a share of the attempts
// with a 503 (and, if asked, loses the answer of some after the API applied
// them), and prints what the retries made of it:
//
//	go run ./examples/testing                      # against an in-memory payments API
//	go run ./examples/testing -reset 0.005         # lose some answers too
//	go run ./examples/testing -url https://payments.staging.example -n 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

func main() {
	var r rehearsal
	flag.IntVar(&r.Charges, "n", 10000, "charges to send")
	flag.IntVar(&r.Workers, "c", 8, "charges in flight at once")
	flag.Float64Var(&r.Rate503, "503", 0.01, "share of attempts the injector answers with 503")
	flag.Float64Var(&r.RateReset, "reset", 0, "share of attempts whose answer the injector loses after the API applied them")
	flag.Uint64Var(&r.Seed, "seed", 1, "seed of the injector's draws")
	flag.StringVar(&r.URL, "url", "", "base URL of the payments API in staging; empty: an in-memory fake")
	flag.Parse()
	if res := rehearse(context.Background(), os.Stdout, r); res.Failed > 0 {
		os.Exit(1)
	}
}

// rehearsal is what to send, and which faults to inject.
type rehearsal struct {
	Charges, Workers   int
	Rate503, RateReset float64
	Seed               uint64
	URL                string // "": the in-memory fake
}

// outcome counts what happened.
type outcome struct {
	Succeeded, Failed          int64
	Attempts, Retries          int64
	Injected503, InjectedReset int64
	Applied, Repeats           int // the in-memory fake's ledger
}

// rehearse sends r.Charges charges through the application's client over
// the fault injector, prints a report to out, and returns the counts.
func rehearse(ctx context.Context, out io.Writer, r rehearsal) outcome {
	var (
		o        outcome
		upstream http.RoundTripper // nil: the real network
		fake     *fakePayments
		where    = r.URL
	)
	if r.URL == "" {
		fake = newFakePayments()
		upstream = &httpretrytest.HandlerTransport{Handler: fake}
		r.URL, where = "https://payments.internal", "an in-memory payments API"
	}
	var injected503, injectedReset, attempts, retries atomic.Int64
	flaky := &chaos.Transport{
		Next: upstream,
		Seed: r.Seed,
		Rules: []chaos.Rule{
			{Name: "503", PathPrefix: "/v1/charges", Rate: r.Rate503, Fault: chaos.Status(http.StatusServiceUnavailable)},
			{Name: "reset", PathPrefix: "/v1/charges", Rate: r.RateReset, Fault: chaos.Reset()},
		},
		OnInject: func(_ *http.Request, rule *chaos.Rule) {
			if rule.Name == "503" {
				injected503.Add(1)
			} else {
				injectedReset.Add(1)
			}
		},
	}
	payments := NewPayments(r.URL, flaky, func(a httpretry.Attempt) {
		attempts.Add(1)
		if a.Retry {
			retries.Add(1)
		}
	})

	var succeeded, failed atomic.Int64
	var firstErr error
	var once sync.Once
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range max(r.Workers, 1) {
		wg.Go(func() {
			for range jobs {
				if _, err := payments.Charge(ctx, 1999); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				succeeded.Add(1)
			}
		})
	}
	for range r.Charges {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)

	o.Succeeded, o.Failed = succeeded.Load(), failed.Load()
	o.Attempts, o.Retries = attempts.Load(), retries.Load()
	o.Injected503, o.InjectedReset = injected503.Load(), injectedReset.Load()
	fmt.Fprintf(out, "rehearsal: %d charges, %d at a time, to %s\n", r.Charges, max(r.Workers, 1), where)
	fmt.Fprintf(out, "injector:  503 on %.2f%% of attempts, lost answer on %.2f%%, seed %d\n", 100*r.Rate503, 100*r.RateReset, r.Seed)
	fmt.Fprintf(out, "charges:   %d succeeded, %d failed, in %v\n", o.Succeeded, o.Failed, took.Round(time.Millisecond))
	fmt.Fprintf(out, "attempts:  %d, of which %d retries\n", o.Attempts, o.Retries)
	fmt.Fprintf(out, "injected:  %d (503: %d, lost answer: %d)\n", o.Injected503+o.InjectedReset, o.Injected503, o.InjectedReset)
	if fake != nil {
		o.Applied, o.Repeats = fake.ledger()
		fmt.Fprintf(out, "ledger:    %d charges applied, %d repeated requests answered from the ledger\n", o.Applied, o.Repeats)
	}
	if firstErr != nil {
		fmt.Fprintf(out, "first failure: %v\n", firstErr)
	}
	return o
}
