package otelhttpretry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/otelhttpretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func ExampleNewTransport() {
	// A server that is busy for the first two requests.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	client := &http.Client{Transport: &httpretry.Transport{
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)}, // no waits in an example
		Base:   otelhttpretry.NewTransport(nil, otelhttp.WithTracerProvider(tp)),
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	for _, s := range spans.GetSpans() {
		count := "-"
		for _, kv := range s.Attributes {
			if kv.Key == "http.request.resend_count" {
				count = kv.Value.String()
			}
		}
		fmt.Printf("%s %s resend_count=%s\n", s.SpanKind, s.Name, count)
	}
	// Output:
	// client HTTP GET resend_count=-
	// client HTTP GET resend_count=1
	// client HTTP GET resend_count=2
}

func ExampleInstrument() {
	// A server that is busy for the first two requests.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	// A service would export with OTLP or Prometheus; the example reads
	// the metrics in memory.
	reader := sdkmetric.NewManualReader()
	t := &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
	if err := otelhttpretry.Instrument(t, otelhttpretry.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		panic(err)
	}
	resp, err := (&http.Client{Transport: t}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	// Each point of the attempts counter, without server.address and
	// server.port (the test server's port changes from run to run).
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == otelhttpretry.MetricAttempts {
			for _, p := range sum.DataPoints {
				var attrs []string
				for _, kv := range p.Attributes.ToSlice() {
					if !strings.HasPrefix(string(kv.Key), "server.") {
						attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
					}
				}
				lines = append(lines, fmt.Sprintf("%d %s", p.Value, strings.Join(attrs, " ")))
			}
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// 1 http.request.method=GET http.response.status_code=200 httpretry.attempt.class=success httpretry.attempt.kind=retry httpretry.stop.reason=success
	// 1 http.request.method=GET http.response.status_code=503 httpretry.attempt.class=transient httpretry.attempt.kind=first httpretry.delay.source=backoff
	// 1 http.request.method=GET http.response.status_code=503 httpretry.attempt.class=transient httpretry.attempt.kind=retry httpretry.delay.source=backoff
}
