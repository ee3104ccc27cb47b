package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// bases are the two ways to build the traced inner layer; both must give
// the same spans.
var bases = map[string]func(trace.TracerProvider) http.RoundTripper{
	"otelhttpretry": func(tp trace.TracerProvider) http.RoundTripper {
		return newTransport(tp, httpretry.Policy{}).Base
	},
	"manual": func(tp trace.TracerProvider) http.RoundTripper {
		return tracedBase(otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	},
}

func TestOneClientSpanPerAttempt(t *testing.T) {
	t.Parallel()
	for name, base := range bases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			api := newFlakyAPI()
			srv := httptest.NewServer(api)
			t.Cleanup(srv.Close)
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

			rt := newTransport(tp, httpretry.Policy{Backoff: backoff.Constant(0)})
			rt.Base = base(tp)
			client := &http.Client{Transport: rt}

			ctx, parent := tp.Tracer("test").Start(context.Background(), "checkout")
			require.NoError(t, call(ctx, client, http.MethodGet, srv.URL+"/inventory", ""))
			require.NoError(t, call(ctx, client, http.MethodPost, srv.URL+"/orders", `{"sku":"w-42"}`))
			parent.End()

			spans := exp.GetSpans()
			type row struct {
				name, status, resend string
			}
			var got []row
			var ids []string
			for _, s := range spans {
				if s.SpanKind != trace.SpanKindClient {
					continue
				}
				assert.Equal(t, parent.SpanContext().SpanID(), s.Parent.SpanID(), "every attempt is a child of the caller's span")
				a := attrs(s.Attributes)
				got = append(got, row{s.Name, a["http.response.status_code"], a["http.request.resend_count"]})
				ids = append(ids, s.SpanContext.SpanID().String())
			}
			assert.Equal(t, []row{
				{"HTTP GET", "503", ""}, // no resend count on the first attempt
				{"HTTP GET", "503", "1"},
				{"HTTP GET", "200", "2"},
				{"HTTP POST", "502", ""},
				{"HTTP POST", "201", "1"},
			}, got)

			// Each request carried its own attempt's span as its parent.
			inv, _ := api.seen("/inventory")
			ord, orders := api.seen("/orders")
			tps := append(inv, ord...)
			require.Len(t, tps, len(ids))
			for i, header := range tps {
				assert.True(t, strings.Contains(header, ids[i]), "request %d: traceparent %q names span %s", i+1, header, ids[i])
			}
			assert.Equal(t, 1, orders, "the keyed POST was applied once")

			// The caller's span has one event per retry.
			last := spans[len(spans)-1]
			require.Equal(t, "checkout", last.Name)
			require.Len(t, last.Events, 3)
			for i, wantAttempt := range []string{"1", "2", "1"} {
				ea := attrs(last.Events[i].Attributes)
				assert.Equal(t, wantAttempt, ea["http.retry.attempt"])
				assert.Equal(t, "transient", ea["http.retry.class"])
				assert.Equal(t, "backoff", ea["http.retry.delay_source"])
			}
		})
	}
}
