// Perhost configures one httpretry.Transport for a service that calls three
// upstreams with different needs, and runs it against local stand-ins of
// them:
//
//   - payments.internal takes keyed POSTs: few attempts, and a long
//     Retry-After is honoured, since a late charge beats a failed one;
//   - search.internal is read-only and latency-bound: a slow attempt is
//     hedged rather than waited out;
//   - every other *.internal service gets no retries from this client.
//
// The demo's Base dials those host names to local test servers, so the URLs
// and the Hosts keys read as they would in production. It needs no network
// beyond 127.0.0.1.
//
//	go run ./examples/perhost
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
)

// newTransport returns the retrying transport of the service. base sends
// each attempt.
func newTransport(base http.RoundTripper, logger *slog.Logger) *httpretry.Transport {
	return &httpretry.Transport{
		Base:   base,
		Logger: logger,
		// Hosts not listed here (third-party APIs) get the default Policy.
		// Each host has its own retry budget, so one failing upstream never
		// spends another's retries.
		Hosts: map[string]httpretry.Policy{
			// Charges are POSTs with an Idempotency-Key (added when the caller
			// sets none), so a retry is applied once. Three attempts, not
			// four; the server may ask for a wait of up to two minutes, twice
			// the default ceiling.
			"payments.internal": {
				MaxAttempts:    3,
				MaxRetryAfter:  2 * time.Minute,
				AttemptTimeout: 10 * time.Second,
			},
			// Searches are GETs. When one has not answered after 50 ms (set
			// this near the upstream's 95th-percentile latency, so about one
			// search in twenty is hedged), a second copy is sent and the first
			// answer wins. A stuck attempt is cut off after one second.
			"search.internal": {
				AttemptTimeout: time.Second,
				Hedge:          httpretry.HedgePolicy{Delay: 50 * time.Millisecond, MaxHedges: 1},
			},
			// Other internal services sit behind a mesh that retries already.
			// Retries at more than one layer multiply: four attempts at each
			// of three layers make 64 calls to the last one. So: none here.
			// The exact host names above win over this wildcard.
			"*.internal": {MaxAttempts: 1},
		},
	}
}

// dialLocal returns a Base that connects to the local server routes names
// for each "host:port", as DNS would in production, and otherwise dials as
// usual. It uses no proxy, so the demo's host names never leave the machine.
func dialLocal(routes map[string]string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if local, ok := routes[addr]; ok {
			addr = local
		}
		return dialer.DialContext(ctx, network, addr)
	}
	return t
}

// upstreams are the local stand-ins of the three services.
type upstreams struct {
	payments, search, inventory *httptest.Server
	charges                     *chargeLedger
	searches                    *slowFirst
}

func startUpstreams(retryAfter string) *upstreams {
	u := &upstreams{charges: newChargeLedger(retryAfter), searches: &slowFirst{}}
	u.payments = httptest.NewServer(u.charges)
	u.search = httptest.NewServer(u.searches)
	u.inventory = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "deploying", http.StatusServiceUnavailable)
	}))
	return u
}

// routes maps the production host names to the local servers.
func (u *upstreams) routes() map[string]string {
	addr := func(s *httptest.Server) string { return s.Listener.Addr().String() }
	return map[string]string{
		"payments.internal:80":  addr(u.payments),
		"search.internal:80":    addr(u.search),
		"inventory.internal:80": addr(u.inventory),
	}
}

func (u *upstreams) close() {
	u.payments.Close()
	u.search.Close()
	u.inventory.Close()
}

func main() {
	u := startUpstreams("1")
	defer u.close()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the demo's output short
			}
			return a
		},
	}))
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: newTransport(dialLocal(u.routes()), logger),
	}

	fmt.Println("1. POST payments.internal/charges: 503 with Retry-After: 1, then 201")
	call(client, http.MethodPost, "http://payments.internal/charges", `{"amount":1999,"currency":"eur"}`)
	fmt.Printf("   charges applied: %d\n", u.charges.applied())

	fmt.Println("\n2. GET search.internal/search: the first attempt stalls; a hedge after 50 ms answers")
	call(client, http.MethodGet, "http://search.internal/search?q=widgets", "")

	fmt.Println("\n3. GET inventory.internal/stock: 503, and *.internal gets no retries")
	call(client, http.MethodGet, "http://inventory.internal/stock", "")
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
	fmt.Printf("   => %s %s after %v\n", resp.Status, strings.TrimSpace(string(b)), time.Since(start).Round(time.Millisecond))
}
