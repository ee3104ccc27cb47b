package httpretrytest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// stdoutTB reports to standard output, so that an example can show what the
// Check functions say. In a test, pass the *testing.T.
type stdoutTB struct{}

func (stdoutTB) Helper()                           {}
func (stdoutTB) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// A POST that meets a 503 and a connection reset before it succeeds: three
// attempts, one idempotency key, one body. (In a test, run this inside
// synctest.Test and keep the default backoff: its waits take no time.)
func ExampleScript() {
	upstream := httpretrytest.NewScript(
		httpretrytest.Status(503),
		httpretrytest.Fail(httpretrytest.ConnReset()),
		httpretrytest.Respond(201, `{"id":"ch_1"}`),
	)
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   upstream,
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
	}}
	resp, err := client.Post("https://api.example.com/charges", "application/json", strings.NewReader(`{"amount":1999}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	reqs := upstream.Requests()
	for _, r := range reqs {
		fmt.Printf("attempt %d: %s %s %s -> status %d, error %v\n", r.Attempt, r.Method, r.URL.Path, r.Body, r.Status, r.Err)
	}
	t := stdoutTB{}
	fmt.Println(httpretrytest.CheckAttempts(t, reqs, 3),
		httpretrytest.CheckSameKey(t, reqs),
		httpretrytest.CheckSameBody(t, reqs),
		httpretrytest.CheckBodiesClosed(t, reqs))
	// Output:
	// attempt 1: POST /charges {"amount":1999} -> status 503, error <nil>
	// attempt 2: POST /charges {"amount":1999} -> status 0, error read tcp: read: connection reset by peer
	// attempt 3: POST /charges {"amount":1999} -> status 201, error <nil>
	// true true true true
}

// Each path can have a script of its own; past its end, a script repeats
// its last outcome.
func ExampleScript_OnPath() {
	upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "ok")).
		OnPath("/flaky", httpretrytest.Status(502), httpretrytest.Respond(200, "recovered"))
	for _, path := range []string{"/flaky", "/other", "/flaky", "/flaky"} {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
		resp, _ := upstream.RoundTrip(req)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, string(body))
	}
	// Output:
	// /flaky 502 Bad Gateway
	// /other 200 ok
	// /flaky 200 recovered
	// /flaky 200 recovered
}

// A fake upstream with logic of its own, served in memory: the first call
// is rate limited, the retry succeeds.
func ExampleHandlerTransport() {
	calls := 0
	upstream := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintf(w, "hello, %s", r.URL.Query().Get("name"))
	})}
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   upstream,
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
	}}
	resp, err := client.Get("https://api.example.com/greet?name=gopher")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	for _, r := range upstream.Requests() {
		fmt.Println("attempt", r.Attempt, "->", r.Status)
	}
	// Output:
	// hello, gopher
	// attempt 1 -> 429
	// attempt 2 -> 200
}

// The decisions a Transport took, as its OnAttempt hook reported them.
func ExampleAttemptLog() {
	var log httpretrytest.AttemptLog
	tr := &httpretry.Transport{
		Base:      httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(404)),
		Policy:    httpretry.Policy{Backoff: backoff.Constant(0)},
		OnAttempt: log.Record,
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/missing", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	for _, a := range log.Attempts() {
		fmt.Println(a.N, a.Response.StatusCode, a.Class, a.Retry, a.DelaySource, a.Stop)
	}
	// Output:
	// 1 503 transient true backoff none
	// 2 404 fatal false none not retryable
}
