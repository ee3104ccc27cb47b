// Package otelhttpretry connects an [httpretry.Transport] to OpenTelemetry:
// it traces every attempt as its own client span, and records metrics of
// the retries, the budget and the breaker. Each is one line:
//
//	t := &httpretry.Transport{Base: otelhttpretry.NewTransport(nil)} // traces
//	if err := otelhttpretry.Instrument(t); err != nil {              // metrics
//		return err
//	}
//
// # Traces
//
// NewTransport, as the Base of the retrying transport, gives each attempt
// its own client span, as the HTTP semantic conventions ask: one span per
// request sent over the wire, and on each resend the attribute
// http.request.resend_count, the attempt number minus one.
//
// The spans come from [otelhttp.NewTransport], so they carry its usual
// attributes and status and propagate the trace context on every attempt;
// all attempts of one call are siblings under the caller's span. The first
// attempt carries no http.request.resend_count: the conventions set it only
// when the request was retried. Only a span otelhttp started for the
// attempt gets it: an attempt that an [otelhttp.WithFilter] option skips
// has no span, and the caller's span, which it carries, is left as it was.
// otelhttp also records the conventions' metric
// http.client.request.duration, once per attempt.
//
// What is counted is httpretry's attempts. A redirect that http.Client
// follows reaches the Transport as a new request and starts again at attempt
// 1; a request that net/http's own Transport silently re-sends on a stale
// keep-alive connection stays inside one attempt and one span.
//
// With another instrumentation, or to keep otelhttp's options in one place,
// put [ResendCount] directly under the layer that starts the span.
//
// # Metrics
//
// Instrument records, through the Transport's OnAttempt and OnCall hooks
// and its Stats: attempts by outcome and by why they were sent, the
// duration of attempts and of whole calls, the waits before retries, the
// attempts a guard refused (a retry budget, a circuit breaker, an overload
// control), and each host's budget level, breaker state, throttling
// probability and concurrency limit. docs/observability.md lists every metric
// with its unit and attributes, and the queries and alerts to build on
// them.
//
// [otelhttp.NewTransport]: https://pkg.go.dev/go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp#NewTransport
// [otelhttp.WithFilter]: https://pkg.go.dev/go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp#WithFilter
package otelhttpretry

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seedhq/httpretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Transport is an http.RoundTripper that sends each request through an
// otelhttp client span whose attributes include http.request.resend_count.
// Create it with NewTransport. It is safe for concurrent use.
type Transport struct {
	traced http.RoundTripper
	base   http.RoundTripper
}

// NewTransport returns a Transport to use as the Base of an
// httpretry.Transport. base sends each attempt; nil means a pooled transport
// from go-cleanhttp, as httpretry itself uses. opts configure the spans as
// for otelhttp.NewTransport (tracer provider, propagators, span names, …).
func NewTransport(base http.RoundTripper, opts ...otelhttp.Option) *Transport {
	if base == nil {
		base = cleanhttp.DefaultPooledTransport()
	}
	return &Transport{traced: otelhttp.NewTransport(ResendCount(base), opts...), base: base}
}

// RoundTrip starts a client span for req, records http.request.resend_count
// on it when req is a resend, and sends req with the base transport. When
// an otelhttp.WithFilter option skips req, no span is started and the
// resend count is recorded nowhere: the caller's span never gets it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if n, ok := httpretry.AttemptFromContext(req.Context()); ok && n > 1 {
		// Tell ResendCount, below otelhttp, which span is the caller's.
		caller := trace.SpanContextFromContext(req.Context())
		req = req.WithContext(context.WithValue(req.Context(), callerSpanKey{}, caller))
	}
	return t.traced.RoundTrip(req)
}

// callerSpanKey is the context key of the span context a request had
// before otelhttp saw it: the caller's.
type callerSpanKey struct{}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method. (otelhttp's transport does not forward the call.)
func (t *Transport) CloseIdleConnections() {
	closeIdle(t.base)
}

// ResendCount returns an http.RoundTripper that sets
// http.request.resend_count on the span in each request's context, when the
// request is attempt n ≥ 2 of an httpretry.Transport (n − 1), and then sends
// it with next. Requests that did not come from an httpretry.Transport, and
// first attempts, pass through unchanged. Put it directly under the layer
// that starts a span per request, such as otelhttp.NewTransport; above that
// layer it would mark the caller's span instead. A nil next means
// http.DefaultTransport.
//
// On its own, ResendCount cannot tell a span started for the request from
// one the request inherited: under a layer that skips some requests
// without a span (otelhttp.WithFilter), it would mark the caller's span
// for those. NewTransport can tell them apart: with a filter, use it.
func ResendCount(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return resendCount{next}
}

type resendCount struct {
	next http.RoundTripper
}

func (rc resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if n, ok := httpretry.AttemptFromContext(ctx); ok && n > 1 {
		span := trace.SpanFromContext(ctx)
		// Under a Transport, a span that is still the caller's was not
		// started for this attempt (otelhttp's filter skipped it).
		if caller, ok := ctx.Value(callerSpanKey{}).(trace.SpanContext); !ok || !span.SpanContext().Equal(caller) {
			span.SetAttributes(semconv.HTTPRequestResendCount(n - 1))
		}
	}
	return rc.next.RoundTrip(req)
}

func (rc resendCount) CloseIdleConnections() {
	closeIdle(rc.next)
}

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
