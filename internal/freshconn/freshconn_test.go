//go:build go1.26

package freshconn

import (
	"context"
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
