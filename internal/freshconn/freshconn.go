// Package freshconn gives one attempt a connection of its own, outside the
// pool of the *http.Transport that sends the others, so that a retry after
// a failure on a shared HTTP/2 connection does not go back to it.
//
// It needs (*http.Transport).NewClientConn, new in Go 1.26; built with an
// older Go, Supported reports false and nothing changes.
package freshconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
)

// Conn is a connection of its own for one request: it is in no pool, and
// whoever dialled it closes it once the request's response body is closed
// or the response is discarded.
type Conn interface {
	http.RoundTripper
	Close() error
}

// Supported reports whether Dial can give rt's requests a connection of
// their own: rt is an *http.Transport that does not bound its connections
// per host (MaxConnsPerHost, which a connection of NewClientConn's would
// not count against), and net/http has NewClientConn.
func Supported(rt http.RoundTripper) bool { return supported(rt) }

// ErrUnsupported is the error of a Dial whose connection was made and
// spoke HTTP/2, but whose HTTP/2 implementation could not make it a
// connection of its own: an implementation that net/http's NewClientConn
// cannot use, such as the one golang.org/x/net/http2.ConfigureTransports
// registers before x/net v0.48. Every later Dial over the same
// RoundTripper would fail the same way.
var ErrUnsupported = errors.New("freshconn: the HTTP/2 implementation cannot make a connection of its own")

// Dial returns a new connection of rt's (its dialer, TLS configuration,
// proxy and protocols) to the host of u, an http or https URL. It fails
// when Supported(rt) is false, and with an error that wraps
// ErrUnsupported when rt's HTTP/2 cannot make connections of their own.
//
// net/http's NewClientConn reports that with an error of no type of its
// own, after the connection was made: Dial tells it from a failure of the
// network by where it came, after a TLS handshake that chose HTTP/2 (or
// on a connection that speaks HTTP/2 without TLS) and by a cause that is
// no net.Error and not the context's. TestDialOverAnHTTP2WithoutNewClientConn
// fails when that changes.
func Dial(ctx context.Context, rt http.RoundTripper, u *url.URL) (Conn, error) {
	var h2 atomic.Bool // the connection was made and speaks HTTP/2
	if priorKnowledge(rt, u.Scheme) {
		h2.Store(true) // a dial of its own that fails with no net.Error is taken for that too
	}
	trace := &httptrace.ClientTrace{TLSHandshakeDone: func(s tls.ConnectionState, err error) {
		h2.Store(err == nil && s.NegotiatedProtocol == "h2")
	}}
	conn, err := dialURL(httptrace.WithClientTrace(ctx, trace), rt, u)
	var ne net.Error
	if err != nil && h2.Load() && ctx.Err() == nil && !errors.As(err, &ne) {
		return nil, fmt.Errorf("%w (%v)", ErrUnsupported, err)
	}
	return conn, err
}

// priorKnowledge reports whether rt speaks HTTP/2 without TLS, and only
// that, to an URL of scheme.
func priorKnowledge(rt http.RoundTripper, scheme string) bool {
	t, ok := rt.(*http.Transport)
	return ok && strings.EqualFold(scheme, "http") && t.Protocols != nil &&
		t.Protocols.UnencryptedHTTP2() && !t.Protocols.HTTP1()
}

func dialURL(ctx context.Context, rt http.RoundTripper, u *url.URL) (Conn, error) {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return dial(ctx, rt, scheme, net.JoinHostPort(u.Hostname(), port))
}
