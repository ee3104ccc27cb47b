// Otel traces every attempt of a retried HTTP call with OpenTelemetry: one
// client span per request sent over the wire, each a child of the caller's
// span, and on every resend the attribute http.request.resend_count, as the
// HTTP semantic conventions ask. It needs no network beyond 127.0.0.1.
//
//	cd examples/otel && go run .
//
// The layering is the one the httpretry package documentation gives:
//
//	http.Client → httpretry.Transport → otelhttp span (+ resend count) → http.Transport
//
// otelhttpretry.NewTransport is that inner layer in one call; tracedBase in
// manual.go spells it out with otelhttp and httpretry.AttemptFromContext.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/otelhttpretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// newTransport returns the retrying transport, tracing each attempt with
// tp. A service would set its global TracerProvider and propagator once
// (otel.SetTracerProvider) and pass no options.
func newTransport(tp trace.TracerProvider, p httpretry.Policy) *httpretry.Transport {
	return &httpretry.Transport{
		Policy: p,
		Base: otelhttpretry.NewTransport(nil,
			otelhttp.WithTracerProvider(tp),
			otelhttp.WithPropagators(propagation.TraceContext{})),
		OnAttempt: recordRetry,
	}
}

// recordRetry adds an event to the caller's span for each retry decided:
// the waits between attempts then show up in the trace with their cause.
// The attempt request's context holds the caller's span, not the attempt's.
func recordRetry(a httpretry.Attempt) {
	if !a.Retry {
		return
	}
	trace.SpanFromContext(a.Request.Context()).AddEvent("http.retry", trace.WithAttributes(
		attribute.Int("http.retry.attempt", a.N),
		attribute.String("http.retry.class", a.Class.String()),
		attribute.Int64("http.retry.delay_ms", a.Delay.Milliseconds()),
		attribute.String("http.retry.delay_source", a.DelaySource.String()),
	))
}

func main() {
	api := newFlakyAPI()
	srv := httptest.NewServer(api)
	defer srv.Close()

	// A real service exports with OTLP (otlptracehttp); the demo keeps
	// spans in memory and prints them.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	client := &http.Client{Timeout: 30 * time.Second, Transport: newTransport(tp, httpretry.Policy{})}

	ctx, span := tp.Tracer("example/checkout").Start(context.Background(), "checkout")
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/inventory", ""},             // 503, 503, 200
		{http.MethodPost, "/orders", `{"sku":"w-42"}`}, // 502, then 201; keyed, so retried
	} {
		if err := call(ctx, client, c.method, srv.URL+c.path, c.body); err != nil {
			log.Fatal(err)
		}
	}
	span.End()

	fmt.Println("spans, in the order they ended:")
	printSpans(spans.GetSpans())

	fmt.Println("\nwhat the server saw (the traceparent of each request names its attempt's span):")
	for _, path := range []string{"/inventory", "/orders"} {
		tps, orders := api.seen(path)
		for _, tp := range tps {
			fmt.Printf("  %-10s traceparent: %s\n", path, tp)
		}
		if path == "/orders" {
			fmt.Printf("  orders applied: %d (one Idempotency-Key for both attempts)\n", orders)
		}
	}
}

func call(ctx context.Context, client *http.Client, method, url, body string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body) // the span of the attempt ends with its body
	return err
}

// printSpans prints client spans with their status and resend count, and
// the caller's span with its retry events.
func printSpans(spans tracetest.SpanStubs) {
	for _, s := range spans {
		a := attrs(s.Attributes)
		if s.SpanKind != trace.SpanKindClient {
			fmt.Printf("  %-14s %s, %d child span(s)\n", s.Name, s.SpanKind, countChildren(spans, s))
			for _, e := range s.Events {
				ea := attrs(e.Attributes)
				fmt.Printf("    event %s: attempt %s was %s; retry in %sms (%s)\n", e.Name,
					ea["http.retry.attempt"], ea["http.retry.class"], ea["http.retry.delay_ms"], ea["http.retry.delay_source"])
			}
			continue
		}
		resend := a["http.request.resend_count"]
		if resend == "" {
			resend = "-"
		}
		fmt.Printf("  %-14s %s, status %s, http.request.resend_count=%s, span %s\n",
			s.Name, s.SpanKind, a["http.response.status_code"], resend, s.SpanContext.SpanID())
	}
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func countChildren(spans tracetest.SpanStubs, parent tracetest.SpanStub) int {
	n := 0
	for _, s := range spans {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() {
			n++
		}
	}
	return n
}

// flakyAPI fails each path its own way, applies each order once per
// Idempotency-Key, and records the traceparent header of every request.
type flakyAPI struct {
	mu          sync.Mutex
	hits        map[string]int
	orders      map[string]bool
	traceparent map[string][]string // path → traceparent of each request
}

func newFlakyAPI() *flakyAPI {
	return &flakyAPI{hits: map[string]int{}, orders: map[string]bool{}, traceparent: map[string][]string{}}
}

func (api *flakyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	api.mu.Lock()
	defer api.mu.Unlock()
	api.hits[r.URL.Path]++
	api.traceparent[r.URL.Path] = append(api.traceparent[r.URL.Path], r.Header.Get("Traceparent"))
	n := api.hits[r.URL.Path]
	switch r.URL.Path {
	case "/inventory":
		if n <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "42 widgets")
	case "/orders":
		api.orders[r.Header.Get("Idempotency-Key")] = true
		if n == 1 {
			http.Error(w, "bad gateway", http.StatusBadGateway) // applied, answer lost
			return
		}
		w.WriteHeader(http.StatusCreated)
	default:
		http.NotFound(w, r)
	}
}

// seen returns the traceparent headers the API received for path, and the
// number of distinct orders it applied.
func (api *flakyAPI) seen(path string) (traceparents []string, orders int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return append([]string(nil), api.traceparent[path]...), len(api.orders)
}
