// Prometheus exports httpretry's metrics through OpenTelemetry's
// Prometheus exporter, on /metrics, next to the status page on
// /debug/httpretry. It needs no network beyond 127.0.0.1: the upstreams
// are local servers, reached under names of their own.
//
//	cd examples/prometheus && go run .                           # a scripted run, then what /metrics says
//	cd examples/prometheus && go run . -listen 127.0.0.1:9464    # the same, then keep serving for a scraper
//
// The wiring a service needs is in newTransport and newAdmin; the rest
// stages failures for the metrics to show: an inventory service that
// answers 503 twice before it answers, a payments service that is down
// (its breaker opens and then refuses calls), a search service that
// rate-limits every request (its retry budget empties and then refuses
// retries), and a catalog service whose first answer is slow enough for a
// hedge to win. docs/observability.md has the queries and alerts to build on
// these metrics.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"github.com/seedhq/httpretry/statuspage"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/otelhttpretry"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// newTransport returns the retrying transport over base, its metrics
// recorded by a MeterProvider whose reader is a Prometheus exporter
// registered with reg. A service would use its own registry (or
// prometheus.DefaultRegisterer) and one MeterProvider for everything.
func newTransport(base http.RoundTripper, reg prometheus.Registerer, p httpretry.Policy, hosts map[string]httpretry.Policy) (*httpretry.Transport, error) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	t := &httpretry.Transport{Base: base, Policy: p, Hosts: hosts}
	if err := otelhttpretry.Instrument(t, otelhttpretry.WithMeterProvider(mp)); err != nil {
		return nil, err
	}
	return t, nil
}

// newAdmin serves what operators read: /metrics for Prometheus and the
// status page. Mount it on a port that only they reach.
func newAdmin(reg prometheus.Gatherer, t *httpretry.Transport) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /debug/httpretry", statuspage.Handler(t))
	return mux
}

// policy retries quickly so that the demo takes no time; the breaker and
// the budgets are the defaults' shape, made small enough to see.
var (
	policy = httpretry.Policy{
		Backoff: backoff.Constant(10 * time.Millisecond),
		Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5, OpenFor: time.Minute},
	}
	hosts = map[string]httpretry.Policy{
		// Hedged, behind the overload controls that watch its load.
		"catalog.example": {
			Hedge:    httpretry.HedgePolicy{Delay: 20 * time.Millisecond},
			Overload: httpretry.OverloadPolicy{Throttle: true, Limit: true},
		},
		// A budget of four retries and no breaker: what stops retries to
		// the search service is the budget alone.
		"search.example": {
			Breaker: httpretry.BreakerPolicy{Disabled: true},
			NewBudget: func(string) httpretry.Budget {
				return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 20, RetryCost: 5})
			},
		},
	}
)

// upstreams starts the three services and returns a Base that reaches
// each by its name, and a function that stops them.
func upstreams() (http.RoundTripper, func()) {
	var inventory, catalog atomic.Int32
	handlers := map[string]http.HandlerFunc{
		"catalog.example": func(w http.ResponseWriter, r *http.Request) {
			if catalog.Add(1) == 1 {
				<-r.Context().Done() // the first answer never comes: the hedge wins
				return
			}
			io.WriteString(w, "widget w-42")
		},
		"inventory.example": func(w http.ResponseWriter, r *http.Request) {
			if inventory.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "42 widgets")
		},
		"payments.example": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		},
		"search.example": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
		},
	}
	addrs := map[string]string{}
	var servers []*httptest.Server
	for name, h := range handlers {
		srv := httptest.NewServer(h)
		servers = append(servers, srv)
		addrs[name+":80"] = srv.Listener.Addr().String()
	}
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := addrs[addr]; ok {
			addr = a
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	return base, func() {
		base.CloseIdleConnections()
		for _, s := range servers {
			s.Close()
		}
	}
}

// traffic sends the scripted requests.
func traffic(ctx context.Context, client *http.Client) {
	get := func(url string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return // an open breaker: counted as a refusal
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 3 {
		get("http://inventory.example/v1/stock")
	}
	for range 4 {
		get("http://payments.example/v1/charges")
	}
	for range 4 {
		get("http://search.example/v1/search?q=widgets")
	}
	get("http://catalog.example/v1/items/w-42")
}

func main() {
	listen := flag.String("listen", "", "after the scripted run, serve /metrics and /debug/httpretry on this address")
	flag.Parse()
	if err := run(os.Stdout, *listen); err != nil {
		log.Fatal(err)
	}
}

// run stages the failures, prints what /metrics then says, and, with
// listen set, goes on serving.
func run(w io.Writer, listen string) error {
	base, stop := upstreams()
	defer stop()
	reg := prometheus.NewRegistry()
	t, err := newTransport(base, reg, policy, hosts)
	if err != nil {
		return err
	}
	traffic(context.Background(), &http.Client{Transport: t, Timeout: 30 * time.Second})

	admin := httptest.NewServer(newAdmin(reg, t))
	defer admin.Close()
	lines, err := scrape(admin.URL + "/metrics")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "httpretry's series on /metrics, histograms as their _count:")
	for _, l := range lines {
		fmt.Fprintln(w, " ", l)
	}
	if listen == "" {
		return nil
	}
	fmt.Fprintf(w, "\nserving http://%s/metrics and http://%s/debug/httpretry\n", listen, listen)
	return http.ListenAndServe(listen, newAdmin(reg, t))
}

// scrape fetches url and returns its httpretry_ series, histograms by
// their count only, without the labels every series carries.
func scrape(url string) ([]string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "httpretry_") || strings.Contains(l, "_bucket{") || strings.Contains(l, "_sum{") {
			continue
		}
		for _, common := range []string{`otel_scope_name="` + otelhttpretry.ScopeName + `",`, `otel_scope_schema_url="",`, `otel_scope_version="",`} {
			l = strings.Replace(l, common, "", 1)
		}
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines, sc.Err()
}
