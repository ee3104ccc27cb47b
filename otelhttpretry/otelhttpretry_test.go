package otelhttpretry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/seedhq/httpretry/otelhttpretry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const resendCount = attribute.Key("http.request.resend_count")

// newTracing returns a tracer provider that exports every ended span to the
// returned in-memory exporter, synchronously.
func newTracing(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// newClient returns a client of httpretry over otelhttpretry over base.
func newClient(tp trace.TracerProvider, base http.RoundTripper) *http.Client {
	return &http.Client{Transport: &httpretry.Transport{
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
		Base: otelhttpretry.NewTransport(base,
			otelhttp.WithTracerProvider(tp),
			otelhttp.WithPropagators(propagation.TraceContext{})),
	}}
}

func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestOneSpanPerAttemptWithResendCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		method   string
		body     string
		failures int
	}{
		{"GET succeeds at once", http.MethodGet, "", 0},
		{"GET after two 503s", http.MethodGet, "", 2},
		{"keyed POST after three 503s", http.MethodPost, `{"amount":1999}`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// 503 to the first tt.failures attempts, then 200.
			var script []httpretrytest.Outcome
			for range tt.failures {
				script = append(script, httpretrytest.Respond(http.StatusServiceUnavailable, "busy"))
			}
			upstream := httpretrytest.NewScript(append(script, httpretrytest.Respond(http.StatusOK, "ok"))...)
			tp, exp := newTracing(t)

			ctx, parent := tp.Tracer("test").Start(context.Background(), "checkout")
			req, err := http.NewRequestWithContext(ctx, tt.method, "https://api.example.com/inventory", strings.NewReader(tt.body))
			require.NoError(t, err)
			resp, err := newClient(tp, upstream).Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			parent.End()
			assert.Equal(t, "ok", string(b))

			attempts := tt.failures + 1
			spans := exp.GetSpans()
			require.Len(t, spans, attempts+1, "one client span per attempt, and the parent")
			client := spans[:attempts] // ended in order; the parent ends last
			seen := upstream.Requests()
			for i, s := range client {
				n := i + 1
				assert.Equal(t, trace.SpanKindClient, s.SpanKind, "attempt %d", n)
				assert.Equal(t, parent.SpanContext().SpanID(), s.Parent.SpanID(), "attempt %d is a child of the caller's span", n)
				v, ok := attr(s, resendCount)
				if n == 1 {
					assert.False(t, ok, "the first attempt is not a resend")
				} else {
					require.True(t, ok, "attempt %d carries the resend count", n)
					assert.Equal(t, int64(n-1), v.AsInt64(), "attempt %d", n)
				}
				status, _ := attr(s, "http.response.status_code")
				if n < attempts {
					assert.Equal(t, int64(http.StatusServiceUnavailable), status.AsInt64())
					assert.Equal(t, codes.Error, s.Status.Code)
				} else {
					assert.Equal(t, int64(http.StatusOK), status.AsInt64())
					assert.Equal(t, codes.Unset, s.Status.Code)
				}
				// The server saw this attempt's span as its parent.
				assert.Contains(t, seen[i].Header.Get("Traceparent"), s.SpanContext.SpanID().String(), "attempt %d", n)
				assert.Equal(t, tt.body, string(seen[i].Body), "attempt %d got the whole body", n)
			}
		})
	}
}

// TestResendCountNeverOnTheCallersSpan: only a span otelhttp started for
// the attempt gets http.request.resend_count. When otelhttp's filter skips
// a request, no span is started and the request carries the caller's
// span, which must stay as the caller left it.
func TestResendCountNeverOnTheCallersSpan(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		filter func(attempt int) bool // which attempts otelhttp traces; nil: all
		traced []int                  // the attempts that get a span
	}{
		{"no filter", nil, []int{1, 2, 3}},
		{"filter skips every attempt", func(int) bool { return false }, nil},
		{"filter skips the resends", func(n int) bool { return n == 1 }, []int{1}},
		{"filter skips the second attempt", func(n int) bool { return n != 2 }, []int{1, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			upstream := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Status(200))
			tp, exp := newTracing(t)
			opts := []otelhttp.Option{otelhttp.WithTracerProvider(tp)}
			if tt.filter != nil {
				opts = append(opts, otelhttp.WithFilter(func(r *http.Request) bool {
					n, _ := httpretry.AttemptFromContext(r.Context())
					return tt.filter(n)
				}))
			}
			client := &http.Client{Transport: &httpretry.Transport{
				Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
				Base:   otelhttpretry.NewTransport(upstream, opts...),
			}}

			ctx, caller := tp.Tracer("test").Start(context.Background(), "checkout")
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/inventory", nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			caller.End()

			spans := exp.GetSpans()
			require.Len(t, spans, len(tt.traced)+1, "a span per traced attempt, and the caller's")
			last := spans[len(spans)-1]
			require.Equal(t, caller.SpanContext().SpanID(), last.SpanContext.SpanID(), "the caller's span ends last")
			v, ok := attr(last, resendCount)
			assert.False(t, ok, "the caller's span carries no resend count, got %v", v.String())
			for i, s := range spans[:len(tt.traced)] {
				n := tt.traced[i]
				v, ok := attr(s, resendCount)
				if n == 1 {
					assert.False(t, ok, "the first attempt is not a resend")
					continue
				}
				require.True(t, ok, "attempt %d carries the resend count", n)
				assert.Equal(t, int64(n-1), v.AsInt64(), "attempt %d", n)
			}
		})
	}
}

func TestResendCountOutsideARetryingTransport(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	tp, exp := newTracing(t)
	client := &http.Client{Transport: otelhttpretry.NewTransport(nil, otelhttp.WithTracerProvider(tp))}

	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	_, ok := attr(spans[0], resendCount)
	assert.False(t, ok)
}

func TestResendCountUnderAnyTracingLayer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32 // a server that is busy for the first request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	tp, exp := newTracing(t)
	// The explicit form of NewTransport: ResendCount directly under otelhttp.
	client := &http.Client{Transport: &httpretry.Transport{
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
		Base:   otelhttp.NewTransport(otelhttpretry.ResendCount(nil), otelhttp.WithTracerProvider(tp)),
	}}

	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	v, ok := attr(spans[1], resendCount)
	require.True(t, ok)
	assert.Equal(t, int64(1), v.AsInt64())
}

func TestCloseIdleConnectionsReachesBase(t *testing.T) {
	t.Parallel()
	base := httpretrytest.NewScript()
	rt := &httpretry.Transport{Base: otelhttpretry.NewTransport(base)}

	rt.CloseIdleConnections()
	otelhttpretry.ResendCount(base).(interface{ CloseIdleConnections() }).CloseIdleConnections()

	assert.Equal(t, 2, base.IdleClosures())
}

// TestRedirectStartsAgainAtAttemptOne: a redirect that http.Client follows
// is a new request to the Transport, so its first attempt is not a resend,
// whatever the attempts before it.
func TestRedirectStartsAgainAtAttemptOne(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/old" && calls.Add(1) == 1:
			w.WriteHeader(http.StatusServiceUnavailable) // retried
		case r.URL.Path == "/old":
			http.Redirect(w, r, "/new", http.StatusFound) // followed by http.Client
		}
	}))
	t.Cleanup(srv.Close)
	tp, exp := newTracing(t)

	resp, err := newClient(tp, nil).Get(srv.URL + "/old")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	spans := exp.GetSpans()
	require.Len(t, spans, 3, "/old twice, /new once")
	var counts []int64
	for _, s := range spans {
		v, ok := attr(s, resendCount)
		if !ok {
			v = attribute.Int64Value(0)
		}
		counts = append(counts, v.AsInt64())
	}
	assert.Equal(t, []int64{0, 1, 0}, counts, "/old's retry is resend 1; /new starts again at attempt 1")
}

// TestClientRequestDurationOncePerAttempt: with NewTransport as Base,
// otelhttp records http.client.request.duration once per attempt, not once
// per call.
func TestClientRequestDurationOncePerAttempt(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(
		httpretrytest.Status(http.StatusServiceUnavailable),
		httpretrytest.Status(http.StatusServiceUnavailable),
		httpretrytest.Status(http.StatusOK),
	)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	client := &http.Client{Transport: &httpretry.Transport{
		Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
		Base:   otelhttpretry.NewTransport(upstream, otelhttp.WithMeterProvider(mp)),
	}}

	resp, err := client.Get("https://api.example.com/items")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	counts := map[int64]uint64{} // by http.response.status_code
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "http.client.request.duration" {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				status, _ := p.Attributes.Value("http.response.status_code")
				counts[status.AsInt64()] += p.Count
			}
		}
	}
	assert.Equal(t, map[int64]uint64{503: 2, 200: 1}, counts, "one measurement per attempt: 503, 503, 200")
}
