//go:build go1.26

package freshconn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestSupported(t *testing.T) {
	if !Supported(&http.Transport{}) {
		t.Error("an *http.Transport is not supported")
	}
	if Supported(&http.Transport{MaxConnsPerHost: 4}) {
		t.Error("a Transport bounding its connections per host is supported")
	}
	if Supported(roundTripFunc(http.DefaultTransport.RoundTrip)) {
		t.Error("a RoundTripper that is not an *http.Transport is supported")
	}
	if _, err := Dial(context.Background(), roundTripFunc(nil), &url.URL{Scheme: "http", Host: "example.com"}); err == nil {
		t.Error("Dial over a RoundTripper that is not an *http.Transport succeeded")
	}
}

// Each Dial is a connection of its own, over HTTP/2 when the server
// speaks it, in no pool: closing it closes the server's end.
func TestDialIsAConnectionOfItsOwn(t *testing.T) {
	var opened, closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := srv.Client().Transport.(*http.Transport)
	u, _ := url.Parse(srv.URL)
	for i := range 2 {
		conn, err := Dial(context.Background(), tr, u)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := conn.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if string(b) != "HTTP/2.0" {
			t.Errorf("protocol %q, want HTTP/2.0", b)
		}
		if got := opened.Load(); got != int32(i+1) {
			t.Errorf("after %d dials, %d connections", i+1, got)
		}
	}
}

// oldH2 returns a Transport whose HTTP/2 is registered as x/net's
// ConfigureTransports registers it before x/net v0.48: a TLSNextProto["h2"]
// function for the pool's connections, and an "https" RoundTripper without
// NewClientConn, which net/http's NewClientConn needs. The pool's HTTP/2
// here answers every request itself; server negotiates h2 and sees no
// request.
func oldH2(server *httptest.Server) *http.Transport {
	tr := server.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.NextProtos = []string{"h2", "http/1.1"}
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{
		"h2": func(string, *tls.Conn) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
			})
		},
	}
	tr.RegisterProtocol("https", roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, http.ErrSkipAltProtocol // no pooled connection of its own: net/http dials
	}))
	return tr
}

// h2Listener starts a TLS server that negotiates h2 and then only holds
// its connections open.
func h2Listener(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{NextProtos: []string{"h2"}}
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { io.Copy(io.Discard, c) },
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// net/http's NewClientConn fails over an HTTP/2 implementation without
// NewClientConn with an error of no type of its own, after the handshake:
// Dial reports it as ErrUnsupported. This fails if net/http reports it
// some other way (then the Transport would fail retries that its pool
// could serve).
func TestDialOverAnHTTP2WithoutNewClientConn(t *testing.T) {
	srv := h2Listener(t)
	tr := oldH2(srv)
	u, _ := url.Parse(srv.URL)
	_, err := Dial(context.Background(), tr, u)
	t.Log(err)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Dial: %v, want ErrUnsupported", err)
	}
	// The pool still serves requests.
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("the pool: %v", err)
	}
	resp.Body.Close()
}

// A dial that fails in the network is not taken for ErrUnsupported.
func TestDialThatFailsIsNotUnsupported(t *testing.T) {
	srv := h2Listener(t)
	tr := oldH2(srv)
	u, _ := url.Parse(srv.URL)
	srv.Close()
	_, err := Dial(context.Background(), tr, u)
	if err == nil || errors.Is(err, ErrUnsupported) {
		t.Fatalf("Dial to a closed server: %v, want the dial's error", err)
	}
}
