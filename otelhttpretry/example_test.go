package otelhttpretry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/otelhttpretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
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
