// Package freshconn gives one attempt a connection of its own, outside the
// pool of the *http.Transport that sends the others, so that a retry after
// a failure on a shared HTTP/2 connection does not go back to it.
//
// It needs (*http.Transport).NewClientConn, new in Go 1.26; built with an
// older Go, Supported reports false and nothing changes.
package freshconn

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
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

// Dial returns a new connection of rt's (its dialer, TLS configuration,
// proxy and protocols) to the host of u, an http or https URL. It fails
// when Supported(rt) is false.
func Dial(ctx context.Context, rt http.RoundTripper, u *url.URL) (Conn, error) {
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
