package main

import (
	"net/http"

	"github.com/seedhq/httpretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// tracedBase is what otelhttpretry.NewTransport builds without a filter,
// spelled out with otelhttp and httpretry.AttemptFromContext alone, for a
// module that would rather not depend on otelhttpretry. Use it as
// httpretry.Transport.Base. It assumes otelhttp starts a span for every
// request: with otelhttp.WithFilter, a skipped request carries the
// caller's span, which resendCount would mark; otelhttpretry.NewTransport
// tells the two apart.
func tracedBase(opts ...otelhttp.Option) http.RoundTripper {
	return otelhttp.NewTransport(resendCount{http.DefaultTransport}, opts...)
}

// resendCount sits directly under otelhttp, so the span in the request's
// context is the attempt's own.
type resendCount struct{ next http.RoundTripper }

func (rc resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	// The conventions set http.request.resend_count only on resends.
	if n, ok := httpretry.AttemptFromContext(req.Context()); ok && n > 1 {
		trace.SpanFromContext(req.Context()).SetAttributes(attribute.Int("http.request.resend_count", n-1))
	}
	return rc.next.RoundTrip(req)
}
