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
	"strings"
	"sync"
	"time"

	"github.com/seedhq/httpretry"
)

func main() {
	srv := httptest.NewServer(newFlakyAPI())
	defer srv.Close()

	client := &http.Client{
		Timeout: 30 * time.Second, // bounds the whole call, retries included
		Transport: &httpretry.Transport{
			OnAttempt: printAttempt,
		},
	}

	fmt.Println("1. GET /inventory: the server answers 503 twice, then 200")
	call(client, http.MethodGet, srv.URL+"/inventory", "")

	fmt.Println("\n2. GET /quota: the server answers 429 with Retry-After: 1, then 200")
	call(client, http.MethodGet, srv.URL+"/quota", "")

	fmt.Println("\n3. POST /charges: the server fails the first try with 502; the retry")
	fmt.Println("   carries the same Idempotency-Key, so the charge is applied once")
	call(client, http.MethodPost, srv.URL+"/charges", `{"amount":1999,"currency":"eur"}`)

	fmt.Println("\n4. GET /missing: 404 is not transient, so it is not retried")
	call(client, http.MethodGet, srv.URL+"/missing", "")
}

func call(client *http.Client, method, url, body string) {
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
		fmt.Printf("   => error after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("   => %d %s after %v\n", resp.StatusCode, strings.TrimSpace(string(b)), time.Since(start).Round(time.Millisecond))
}

func printAttempt(a httpretry.Attempt) {
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
	fmt.Printf("   attempt %d %s %s%s -> %s [%s] %s\n", a.N, a.Request.Method, a.Request.URL.Path, key, outcome, a.Class, next)
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
		http.NotFound(w, r)
	}
}
