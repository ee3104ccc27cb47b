package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/go-resty/resty/v2"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// wedgedAttemptTimeout bounds an attempt on a stream that is never
// answered, for httpretry and for each peer (their per-attempt timeout).
const wedgedAttemptTimeout = 500 * time.Millisecond

// wedgedServer is an HTTP/2 server (TLS, h2 by ALPN) whose first
// connection goes bad once wedge is called, while every new connection is
// served by the ledger. "wedged": the stream is read, its payment applied,
// and never answered (the connection still answers PINGs, so net/http
// keeps it pooled). "reset": the stream is reset (RST_STREAM) before the
// ledger sees it, and the connection lives on.
type wedgedServer struct {
	*httptest.Server
	led     *ledger
	mode    string
	wedged  atomic.Bool
	conns   sync.Map     // remote address → connection number
	opened  atomic.Int32 // connections accepted
	onFirst atomic.Int64 // streams the bad connection got once it went bad
	arrived atomic.Int64 // requests that arrived
	h2      atomic.Int64 // of those, over HTTP/2
}

func newWedgedServer(t *testing.T, mode string) *wedgedServer {
	s := &wedgedServer{led: newLedger(), mode: mode}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.EnableHTTP2 = true
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Store(c.RemoteAddr().String(), s.opened.Add(1))
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *wedgedServer) serve(w http.ResponseWriter, r *http.Request) {
	s.arrived.Add(1)
	if r.ProtoMajor == 2 {
		s.h2.Add(1)
	}
	n, _ := s.conns.Load(r.RemoteAddr)
	if n != int32(1) || !s.wedged.Load() {
		s.led.ServeHTTP(w, r)
		return
	}
	s.onFirst.Add(1)
	if s.mode == "reset" {
		panic(http.ErrAbortHandler) // RST_STREAM; the connection lives on
	}
	s.led.ServeHTTP(httptest.NewRecorder(), r) // applied; the answer is lost
	<-r.Context().Done()
}

// clientTLS trusts the server's certificate.
func (s *wedgedServer) clientTLS() *tls.Config {
	return s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
}

// warm sends one request over rt so that its pool holds the first
// connection, then makes that connection go bad.
func (s *wedgedServer) warm(t *testing.T, get func(url string) error) {
	t.Helper()
	require.NoError(t, get(s.URL+"/warm"))
	s.wedged.Store(true)
}

// Wedged connection: an HTTP/2 connection in the pool stops answering its
// streams (or resets them) while new connections are served. httpretry's
// retry after the attempt's timeout, or after the reset, goes on a
// connection of its own, so each call succeeds within one retry and each
// keyed POST is applied once. The peers (TestWedgedConnectionPeers) retry
// on the pooled connection, which fails again.
func TestWedgedConnection(t *testing.T) {
	for _, mode := range []string{"wedged", "reset"} {
		t.Run(mode, func(t *testing.T) {
			srv := newWedgedServer(t, mode)
			base := &http.Transport{TLSClientConfig: srv.clientTLS(), ForceAttemptHTTP2: true}
			defer base.CloseIdleConnections()
			var attempts sync.Map // *http.Request → attempts of its call
			tr := &httpretry.Transport{Base: base,
				Policy: httpretry.Policy{AttemptTimeout: wedgedAttemptTimeout, Backoff: backoff.Constant(time.Millisecond)},
				OnCall: func(c httpretry.Call) { attempts.Store(c.Request, c.Attempts) }}
			srv.warm(t, func(url string) error { return status(tr.RoundTrip(mustRequest(t, http.MethodGet, url, ""))) })

			const calls, workers = 160, 8
			var ok, within, next atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for i := next.Add(1); i <= calls; i = next.Add(1) {
						method, payload := http.MethodGet, ""
						if i%2 == 1 {
							method, payload = http.MethodPost, fmt.Sprintf("amount=1&id=%d", i)
						}
						req := mustRequest(t, method, srv.URL+"/pay", payload)
						err := status(tr.RoundTrip(req))
						if err != nil {
							t.Logf("%s: %v", method, err)
							continue
						}
						ok.Add(1)
						if a, _ := attempts.Load(req); a.(int) <= 2 {
							within.Add(1)
						}
					}
				})
			}
			wg.Wait()
			st := srv.led.stats()
			figure(t, "Wedged connection", "httpretry (an *http.Transport as Base, AttemptTimeout %v, waits 1 ms), HTTP/2 connection %s while new ones are served, %d calls (GET and keyed POST alternately) from %d goroutines: %d succeeded (%.1f %%), %d within one retry (%.1f %%); the bad connection got %d streams (each call's first attempt); %d connections opened; keyed POSTs applied once each (most applications of one key: %d, of %d keys); command: `cd e2e && go test -race -run TestWedgedConnection -v .`",
				wedgedAttemptTimeout, map[string]string{"wedged": "stops answering its streams", "reset": "resets its streams"}[mode],
				calls, workers, ok.Load(), 100*float64(ok.Load())/calls, within.Load(), 100*float64(within.Load())/calls,
				srv.onFirst.Load(), srv.opened.Load(), st.maxKey, st.keys)

			assert.Equal(t, int64(calls), ok.Load(), "every call succeeded")
			assert.GreaterOrEqual(t, within.Load()*100, int64(99*calls), "≥ 99 %% within one retry")
			assert.Equal(t, int64(calls), srv.onFirst.Load(), "no retry went back to the bad connection")
			assert.LessOrEqual(t, st.maxKey, 1, "no keyed POST applied twice")
			assert.Equal(t, calls/2, st.keys, "every keyed POST arrived, with a key of its own")
			assert.Equal(t, srv.arrived.Load(), srv.h2.Load(), "every request spoke HTTP/2")
		})
	}
}

// wedgedPeers are the peers with their default attempts and waits of 1 ms,
// over a transport that trusts srv and speaks HTTP/2, each given
// wedgedAttemptTimeout per attempt (without one, a call on a stream that is
// never answered would wait for ever).
func wedgedPeers(srv *wedgedServer) []peer {
	rc := retryablehttp.NewClient() // RetryMax 4: 5 attempts
	rc.Logger = nil
	rc.RetryWaitMin, rc.RetryWaitMax = time.Millisecond, 2*time.Millisecond
	rc.HTTPClient.Transport.(*http.Transport).TLSClientConfig = srv.clientTLS()
	rc.HTTPClient.Timeout = wedgedAttemptTimeout // each attempt is one HTTPClient.Do
	fsBase := &http.Transport{TLSClientConfig: srv.clientTLS(), ForceAttemptHTTP2: true}
	fs := &http.Client{Transport: failsafehttp.NewRoundTripper(fsBase,
		failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Millisecond, 2*time.Millisecond).Build(), // 3 attempts
		timeout.New[*http.Response](wedgedAttemptTimeout))}                                             // inside the retries: per attempt
	rs := resty.New().SetLogger(quiet{}).SetTLSClientConfig(srv.clientTLS()).SetTimeout(wedgedAttemptTimeout).
		SetRetryCount(3).SetRetryWaitTime(time.Millisecond).SetRetryMaxWaitTime(2 * time.Millisecond).
		AddRetryCondition(func(r *resty.Response, err error) bool { return err != nil || r.StatusCode() >= 500 })
	return []peer{
		{"go-retryablehttp v0.7.8", "NewClient: 5 attempts, HTTPClient.Timeout per attempt", func(url string) error { return status(rc.StandardClient().Get(url)) },
			rc.HTTPClient.CloseIdleConnections},
		{"failsafe-go v0.9.8", "failsafehttp retry policy (3 attempts) around a timeout policy", func(url string) error { return status(fs.Get(url)) },
			fsBase.CloseIdleConnections},
		{"resty v2.17.2", "SetRetryCount(3): 4 attempts, retrying errors and 5xx, SetTimeout per attempt", restyGet(rs), func() { rs.GetClient().CloseIdleConnections() }},
	}
}

// TestWedgedConnectionPeers: the same servers through the peers, GETs only
// (their retries do not key a POST). Every retry takes the pooled
// connection again.
func TestWedgedConnectionPeers(t *testing.T) {
	for _, mode := range []string{"wedged", "reset"} {
		t.Run(mode, func(t *testing.T) {
			for i := range len(wedgedPeers(newWedgedServer(t, mode))) {
				srv := newWedgedServer(t, mode) // a server, and its first connection, per peer
				p := wedgedPeers(srv)[i]
				t.Run(p.name, func(t *testing.T) {
					defer p.close()
					srv.warm(t, p.get)
					const calls = 8
					var ok atomic.Int64
					var wg sync.WaitGroup
					for range calls {
						wg.Go(func() {
							if p.get(srv.URL+"/get") == nil {
								ok.Add(1)
							}
						})
					}
					wg.Wait()
					figure(t, "Wedged connection", "%s (%s, %v per attempt), HTTP/2 connection %s: %d of %d GETs succeeded; the bad connection got %d streams; %d connections opened; %d of %d requests over HTTP/2",
						p.name, p.setup, wedgedAttemptTimeout, map[string]string{"wedged": "stops answering", "reset": "resets its streams"}[mode],
						ok.Load(), calls, srv.onFirst.Load(), srv.opened.Load(), srv.h2.Load(), srv.arrived.Load())
					assert.Equal(t, srv.arrived.Load(), srv.h2.Load(), "every request spoke HTTP/2")
				})
			}
		})
	}
}

func mustRequest(t *testing.T, method, url, payload string) *http.Request {
	t.Helper()
	var req *http.Request
	var err error
	if payload == "" {
		req, err = http.NewRequest(method, url, nil)
	} else {
		req, err = http.NewRequest(method, url, strings.NewReader(payload))
	}
	require.NoError(t, err)
	return req
}
