package xnet

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// A Base configured by x/net v0.43's ConfigureTransports: the retry after
// an attempt timeout on a pooled HTTP/2 connection asks for a connection
// of its own, which this HTTP/2 cannot make. The Transport finds that out
// at the first such retry, logs it once, and sends that retry and every
// later one through the pool, where they succeed. (Each such retry did a
// full handshake and failed, and so did every retry after it: every call
// failed although the server had answered nothing wrong.)
func TestConfigureTransportsBeforeV048(t *testing.T) {
	var opened atomic.Int32
	var first sync.Map // the connections that have hung a request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, hung := first.LoadOrStore(r.RemoteAddr, true); !hung {
			<-r.Context().Done() // each connection's first stream is never answered
			return
		}
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}
	if _, err := http2.ConfigureTransports(base); err != nil {
		t.Fatal(err)
	}
	defer base.CloseIdleConnections()
	var log bytes.Buffer
	var mu sync.Mutex
	var attempts []int
	rt := &httpretry.Transport{Base: base,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{mu: &mu, w: &log}, nil)),
		OnCall: func(c httpretry.Call) { attempts = append(attempts, c.Attempts) },
		Policy: httpretry.Policy{AttemptTimeout: 300 * time.Millisecond, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			cancel()
			t.Fatalf("call %d: %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if string(body) != "HTTP/2.0" {
			t.Errorf("call %d: %q, want HTTP/2.0", i+1, body)
		}
	}
	if want := []int{2, 1, 1}; !equal(attempts, want) {
		t.Errorf("attempts per call %v, want %v: the first call's retry succeeds through the pool", attempts, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(log.String(), "Base cannot give a retry a connection of its own"); n != 1 {
		t.Errorf("the log says %d times that Base has no connections of their own, want once:\n%s", n, log.String())
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the pool's, and one dial of a connection of its own", n)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
