// Quickstart runs a deliberately flaky HTTP server on loopback and calls it
// through httpretry, printing one line per attempt and the outcome of each
// call. It needs no network beyond 127.0.0.1.
//
//	go run ./examples/quickstart
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seedhq/httpretry"
)

func main() {
	srv := httptest.NewServer(newFlakyAPI())
	defer srv.Close()
	run(os.Stdout, srv.URL, nil)
}

// run calls the flaky API at baseURL through httpretry, over base (nil:
// the Transport's own pooled transport), and writes what happens to out.
func run(out io.Writer, baseURL string, base http.RoundTripper) {
	client := &http.Client{
		Timeout: 30 * time.Second, // bounds the whole call, retries included
		Transport: &httpretry.Transport{
			Base:      base,
			OnAttempt: func(a httpretry.Attempt) { printAttempt(out, a) },
		},
	}

	fmt.Fprintln(out, "1. GET /inventory: the server answers 503 twice, then 200")
	call(out, client, http.MethodGet, baseURL+"/inventory", "")

	fmt.Fprintln(out, "\n2. GET /quota: the server answers 429 with Retry-After: 1, then 200")
	call(out, client, http.MethodGet, baseURL+"/quota", "")

	fmt.Fprintln(out, "\n3. POST /charges: the server fails the first try with 502; the retry")
	fmt.Fprintln(out, "   carries the same Idempotency-Key, so the charge is applied once")
	call(out, client, http.MethodPost, baseURL+"/charges", `{"amount":1999,"currency":"eur"}`)

	fmt.Fprintln(out, "\n4. GET /missing: 404 is not transient, so it is not retried")
	call(out, client, http.MethodGet, baseURL+"/missing", "")
}

func call(out io.Writer, client *http.Client, method, url, body string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(out, "   => error after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(out, "   => %s: %q, after %v\n", resp.Status, strings.TrimSpace(string(b)), time.Since(start).Round(time.Millisecond))
}

func printAttempt(out io.Writer, a httpretry.Attempt) {
	outcome := ""
	if a.Err != nil {
		outcome = a.Err.Error()
	} else {
		outcome = a.Response.Status
	}
	key := ""
	if k := a.Request.Header.Get("Idempotency-Key"); k != "" {
		key = " key=" + k[:min(8, len(k))] + "…"
	}
	next := "done: " + a.Stop.String()
	if a.Retry {
		next = fmt.Sprintf("retry in %v (%s)", a.Delay.Round(time.Millisecond), a.DelaySource)
	}
	fmt.Fprintf(out, "   attempt %d %s %s%s -> %s [%s] %s\n", a.N, a.Request.Method, a.Request.URL.Path, key, outcome, a.Class, next)
}

// flakyAPI fails each endpoint in its own way, and applies each charge once
// per Idempotency-Key, as a payment API does.
type flakyAPI struct {
	mu      sync.Mutex
	hits    map[string]int
	charges map[string]bool
}

func newFlakyAPI() *flakyAPI {
	return &flakyAPI{hits: map[string]int{}, charges: map[string]bool{}}
}

func (api *flakyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.hits[r.URL.Path]++
	n := api.hits[r.URL.Path]
	switch r.URL.Path {
	case "/inventory":
		if n <= 2 {
			http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "42 widgets")
	case "/quota":
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "quota ok")
	case "/charges":
		key := r.Header.Get("Idempotency-Key")
		io.Copy(io.Discard, r.Body)
		if !api.charges[key] {
			api.charges[key] = true // applied, but the answer is lost on the first try
		}
		if n == 1 {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		fmt.Fprintf(w, "charged once (%d charge(s) recorded)\n", len(api.charges))
	default:
		http.Error(w, "no such endpoint", http.StatusNotFound)
	}
}
