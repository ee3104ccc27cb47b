// Cenkalti shows a cenkalti/backoff/v5 BackOff used as httpretry's backoff
// strategy (FromBackOff in strategy.go), against a local server that fails
// twice before answering. It needs no network beyond 127.0.0.1.
//
//	cd examples/cenkalti && go run .
//
// Use the adapter when a BackOff is already part of your configuration.
// Otherwise prefer httpretry's own strategies: the same shape as
// cenkalti's ExponentialBackOff defaults is
//
//	backoff.Exponential{Base: 500 * time.Millisecond, Factor: 1.5, Cap: time.Minute,
//		Jitter: backoff.PercentJitter, Percent: 0.5}
//
// with the cap a ceiling after jitter, and backoff.Default()'s full jitter
// spreads clients that failed together more evenly than ±50 %.
package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/seedhq/httpretry"
)

// newTransport returns an httpretry Transport whose waits come from a
// fresh cenkalti ExponentialBackOff (short intervals, for the demo).
func newTransport(base http.RoundTripper, onAttempt func(httpretry.Attempt)) *httpretry.Transport {
	return &httpretry.Transport{
		Base: base,
		Policy: httpretry.Policy{
			MaxAttempts: 4,
			Backoff: FromBackOff{New: func() cenkalti.BackOff {
				b := cenkalti.NewExponentialBackOff()
				b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
				return b
			}},
		},
		OnAttempt: onAttempt,
	}
}

func main() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{Transport: newTransport(nil, func(a httpretry.Attempt) {
		status := "error"
		if a.Response != nil {
			status = a.Response.Status
		}
		next := "done: " + a.Stop.String()
		if a.Retry {
			next = fmt.Sprintf("retry in %v (%s)", a.Delay.Round(time.Millisecond), a.DelaySource)
		}
		fmt.Printf("attempt %d -> %s, %s\n", a.N, status, next)
	})}
	fmt.Println("GET: 503 twice, then 200; waits from cenkalti's ExponentialBackOff (100 ms, ×1.5, ±50 %)")
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("=> error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println("=>", resp.Status)
}
