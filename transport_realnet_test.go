package httpretry_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// These tests use real loopback sockets, so waits are zero: the fake clock
// of synctest cannot drive network I/O.
var noWait = httpretry.Policy{Backoff: backoff.Constant(0)}

// flakyServer fails the first `failures` requests with 503 (with a body, so
// draining matters for reuse) and records what each request carried.
type flakyServer struct {
	failures int
	mu       sync.Mutex
	bodies   []string
	keys     []string
	protos   []int
	conns    atomic.Int32
}

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	s.protos = append(s.protos, r.ProtoMajor)
	n := len(s.bodies)
	s.mu.Unlock()
	if n <= s.failures {
		http.Error(w, strings.Repeat("overloaded ", 100), http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok")
}

func (s *flakyServer) start(t *testing.T, h2 bool) *httptest.Server {
	return startServer(t, s, h2, func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	})
}

// startServer serves h on a loopback socket, over HTTP/2 with TLS when h2,
// until the test ends; connState, if non-nil, sees each connection's state.
func startServer(t *testing.T, h http.Handler, h2 bool, connState func(net.Conn, http.ConnState)) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = connState
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

func TestRealSocketsReplayAndReuse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		h2    bool
		proto int
	}{{"HTTP/1.1", false, 1}, {"HTTP/2 over TLS", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &flakyServer{failures: 2}
			srv := s.start(t, tc.h2)
			client := &http.Client{Transport: &httpretry.Transport{Base: srv.Client().Transport, Policy: noWait}}
			// An opaque body, so the transport must buffer it to replay it.
			body := struct{ io.Reader }{strings.NewReader(`{"amount":100}`)}
			resp, err := client.Post(srv.URL+"/charges", "application/json", body)
			require.NoError(t, err)
			assert.Equal(t, "ok", readAll(t, resp.Body))
			resp.Body.Close()

			require.Len(t, s.bodies, 3)
			for i := range s.bodies {
				assert.Equal(t, `{"amount":100}`, s.bodies[i])
				assert.Equal(t, s.keys[0], s.keys[i])
				assert.Equal(t, tc.proto, s.protos[i])
			}
			assert.NotEmpty(t, s.keys[0])
			assert.EqualValues(t, 1, s.conns.Load(), "drained responses let one connection serve every attempt")
		})
	}
}

func TestZeroValueTransport(t *testing.T) {
	t.Parallel()
	s := &flakyServer{}
	srv := s.start(t, false)
	client := &http.Client{Transport: &httpretry.Transport{}}
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp.Body))
	resp.Body.Close()
}

func TestUntrustedCertificateIsTriedOnce(t *testing.T) {
	t.Parallel()
	s := &flakyServer{}
	srv := s.start(t, true)
	var attempts int
	tr := &httpretry.Transport{Policy: noWait, OnAttempt: func(httpretry.Attempt) { attempts++ }}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.Nil(t, resp)
	var certErr *tls.CertificateVerificationError
	assert.ErrorAs(t, err, &certErr)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, httpretry.StopFatal, re.Stop)
	assert.Equal(t, 1, attempts)
	assert.Empty(t, s.bodies, "the handshake failed before any request")
}

func TestRefusedConnection(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	// Even an unkeyed POST is retried: a refused dial proves it was never sent.
	tr := &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Constant(0), Keys: httpretry.KeyPolicy{Disabled: true}}}
	resp, err := (&http.Client{Transport: tr}).Post(url, "text/plain", strings.NewReader("x"))
	require.Nil(t, resp)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 4, re.Attempts)
	var op *net.OpError
	assert.ErrorAs(t, err, &op)
}

func TestRequestThatReachedTheServer(t *testing.T) {
	t.Parallel()
	// The server reads the request, then drops the connection without an
	// answer: the outcome is unknown.
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method string
		want   int32
	}{{"PATCH", 1}, {"GET", 4}, {"POST", 4}} { // POST carries an injected key
		t.Run(tc.method, func(t *testing.T) {
			hits.Store(0)
			base := &http.Transport{DisableKeepAlives: true} // no hidden retries on reused connections
			tr := &httpretry.Transport{Base: base, Policy: noWait}
			req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader("x"))
			_, err := tr.RoundTrip(req)
			require.Error(t, err)
			assert.Equal(t, tc.want, hits.Load())
		})
	}
}
