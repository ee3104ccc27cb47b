package chaos_test

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

// A rehearsal: 2 % of the calls to the payments host meet a 503 from the
// fault injector under httpretry, which retries them. Every call succeeds;
// the counts say what it cost.
func ExampleTransport() {
	upstream := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})}
	var injected, attempts atomic.Int64
	client := &http.Client{Transport: &httpretry.Transport{
		Base: &chaos.Transport{
			Next: upstream,
			Seed: 1,
			Rules: []chaos.Rule{
				{Name: "payments 503", Host: "payments.internal", Rate: 0.02, Fault: chaos.Status(503)},
			},
			OnInject: func(*http.Request, *chaos.Rule) { injected.Add(1) },
		},
		Policy:    httpretry.Policy{Backoff: backoff.Constant(0)}, // a rehearsal keeps the real backoff
		OnAttempt: func(httpretry.Attempt) { attempts.Add(1) },
	}}
	ok := 0
	for range 1000 {
		resp, err := client.Get("https://payments.internal/v1/balance")
		if err != nil {
			fmt.Println(err)
			continue
		}
		if resp.StatusCode == http.StatusOK {
			ok++
		}
		resp.Body.Close()
	}
	fmt.Printf("1000 calls: %d succeeded, %d attempts, %d faults injected\n", ok, attempts.Load(), injected.Load())
	// Output:
	// 1000 calls: 1000 succeeded, 1025 attempts, 25 faults injected
}

// Injection can be switched off and on while traffic runs, for every
// request at once (SetEnabled) or per request (Rule.If).
func ExampleTransport_SetEnabled() {
	flaky := &chaos.Transport{
		Next: httpretrytest.NewScript(httpretrytest.Status(200)),
		Rules: []chaos.Rule{{
			Rate:  1,
			Fault: chaos.Status(503),
			If:    func(r *http.Request) bool { return r.Header.Get("X-Rehearsal") != "" },
		}},
	}
	send := func(rehearsal bool) int {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
		if rehearsal {
			req.Header.Set("X-Rehearsal", "1")
		}
		resp, _ := flaky.RoundTrip(req)
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println(send(false), send(true))
	flaky.SetEnabled(false)
	fmt.Println(send(false), send(true))
	// Output:
	// 200 503
	// 200 200
}

// A fault of your own: here, a response whose header says the upstream is
// degraded, passed on from the real answer.
func ExampleFault() {
	degraded := chaos.Fault(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil {
			resp.Header.Set("X-Degraded", "true")
		}
		return resp, err
	})
	flaky := &chaos.Transport{
		Next:  httpretrytest.NewScript(httpretrytest.Status(200)),
		Rules: []chaos.Rule{{Rate: 1, Fault: chaos.Chain(chaos.Latency(0), degraded)}},
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	resp, _ := flaky.RoundTrip(req)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("X-Degraded"))
	// Output:
	// 200 true
}
