//go:build go1.26

package httpretry_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Every kind of attempt — the first, a retry, a hedge, a resume — is begun
// by one plan: where it goes, over which connection, under which timer.
// These tests are where the kinds meet.

// In a hedged call, the retry after a stream reset is the first attempt of
// its round: it gets a connection of its own, as a retry outside a hedged
// call does, and runs under its AttemptTimeout. (It ran without one, and a
// retry that hung waited for the caller's deadline.)
func TestHedgedRetryAfterResetHasItsTimeoutAndItsOwnConn(t *testing.T) {
	var requests atomic.Int32
	conns := make(chan int32, 8) // the connection of each request, in order
	srv := startConnServer(t, h2, func(conn int32, w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		conns <- conn
		switch n {
		case 1:
			panic(http.ErrAbortHandler) // RST_STREAM: the connection lives on in the pool
		case 2:
			<-r.Context().Done() // the retry hangs
			return
		}
		w.Write([]byte("ok"))
	})
	const timeout = 300 * time.Millisecond
	o := &httpretrytest.AttemptLog{}
	rt := &httpretry.Transport{Base: srv.base(t), OnAttempt: o.Record, Policy: httpretry.Policy{
		AttemptTimeout: timeout, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget,
		Hedge: httpretry.HedgePolicy{Delay: time.Minute}, // hedging on; no hedge is sent
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	began := time.Now()
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp.Body))
	resp.Body.Close()
	attempts := o.Attempts()
	require.Len(t, attempts, 3)
	assert.ErrorIs(t, attempts[1].Err, httpretry.ErrAttemptTimeout, "the hung retry was cut by its AttemptTimeout")
	assert.Less(t, time.Since(began), 5*time.Second, "the call waited for the caller's deadline")
	first, second := <-conns, <-conns
	assert.NotEqual(t, first, second, "the retry after the reset went back to the connection that reset it")
}

// The same with the default Base, after a connection reset that names its
// address: the retry, begun for a connection of its own, was sent through
// the pool without its timer.
func TestHedgedRetryAfterConnResetHasItsTimeout(t *testing.T) {
	var requests atomic.Int32
	srv := startConnServer(t, h1, func(conn int32, w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1:
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close() // a reset
			}
			return
		case 2:
			<-r.Context().Done() // the retry hangs
			return
		}
		w.Write([]byte("ok"))
	})
	o := &httpretrytest.AttemptLog{}
	rt := &httpretry.Transport{OnAttempt: o.Record, Policy: httpretry.Policy{
		AttemptTimeout: 300 * time.Millisecond, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget,
		Hedge: httpretry.HedgePolicy{Delay: time.Minute},
	}}
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	began := time.Now()
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp.Body))
	resp.Body.Close()
	attempts := o.Attempts()
	require.Len(t, attempts, 3)
	assert.ErrorIs(t, attempts[1].Err, httpretry.ErrAttemptTimeout, "the hung retry was cut by its AttemptTimeout")
	assert.Less(t, time.Since(began), 5*time.Second, "the call waited for the caller's deadline")
}

// With failover and PrepareRetry, a hedge goes to the endpoint it is
// booked to: the hedges of a round are made from the request PrepareRetry
// edited for the round's first attempt, which went to another endpoint.
// (A hedge booked to the request's own host went to that other endpoint:
// its Attempt.Host, breaker and budget were the own host's, its answer the
// other's.)
func TestHedgeGoesWhereItIsBooked(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		went := map[*http.Request]string{} // each attempt's request → the URL host Base saw
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			went[req] = req.URL.Host + " " + req.Host
			n, _ := httpretry.AttemptFromContext(req.Context())
			mu.Unlock()
			switch {
			case n == 1:
				return ixResp(req, 503), nil
			case req.URL.Host == "us.test":
				select { // the second region is slow: the retry there is hedged
				case <-time.After(time.Second):
				case <-req.Context().Done():
					return nil, context.Cause(req.Context())
				}
			}
			return ixResp(req, 200), nil
		})
		o := &httpretrytest.AttemptLog{}
		p := failoverPolicy()
		p.Endpoints = []string{"us.test"}
		p.Hedge = httpretry.HedgePolicy{Delay: 50 * time.Millisecond, MaxHedges: 1}
		p.PrepareRetry = func(_ httpretry.Attempt, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer refreshed")
			return nil
		}
		tr := &httpretry.Transport{Base: base, OnAttempt: o.Record, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		attempts := o.Attempts()
		require.Len(t, attempts, 3, "the first attempt, the retry to us.test and its hedge")
		mu.Lock()
		defer mu.Unlock()
		for _, a := range attempts {
			host, _, _ := strings.Cut(a.Host, ":")
			assert.Equal(t, host+" "+host, went[a.Request], "attempt %d (hedge %v) is booked to %s", a.N, a.Hedge, a.Host)
		}
		hedge := attempts[len(attempts)-1]
		for _, a := range attempts {
			if a.Hedge {
				hedge = a
			}
		}
		require.True(t, hedge.Hedge)
		assert.Equal(t, "eu.test:443", hedge.Host, "the hedge avoids the endpoint its round has an attempt out on")
		assert.Equal(t, "Bearer refreshed", hedge.Request.Header.Get("Authorization"), "the hedge carries PrepareRetry's edits")
	})
}

// A Base whose HTTP/2 is golang.org/x/net's, registered by its
// ConfigureTransports before x/net v0.48, cannot make a connection of its
// own (net/http's NewClientConn needs a method those versions lack). The
// retry that asked for one goes through the pool, as every later retry
// does; the Logger hears it once. (Each such retry did a handshake and
// failed, and so did every retry after it: the call failed although the
// pool would have served it.)
func TestBaseWithoutConnsOfItsOwnUsesThePool(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{NextProtos: []string{"h2"}}
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { io.Copy(io.Discard, c) },
	}
	var opened atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	// The pool's HTTP/2, as ConfigureTransports installs it: here it
	// answers itself, the first request of each call with a hang.
	var requests atomic.Int32
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.NextProtos = []string{"h2", "http/1.1"}
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{
		"h2": func(string, *tls.Conn) http.RoundTripper {
			return httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if requests.Add(1)%2 == 1 {
					<-req.Context().Done()
					return nil, req.Context().Err()
				}
				return ixResp(req, 200), nil
			})
		},
	}
	tr.RegisterProtocol("https", httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, http.ErrSkipAltProtocol
	}))
	t.Cleanup(tr.CloseIdleConnections)

	rt := &httpretry.Transport{Base: tr, Policy: httpretry.Policy{
		AttemptTimeout: 200 * time.Millisecond, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}}
	o := watch(rt)
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		resp.Body.Close()
	}
	for _, c := range o.calls {
		assert.Equal(t, 2, c.Attempts, "the retry after the timeout succeeded through the pool")
	}
	assert.Len(t, o.lines("connection of its own"), 1, "the Logger hears it once")
	assert.Equal(t, int32(2), opened.Load(), "the pool's connection, and one dial of a connection of its own, once")
}

// A resume goes to the endpoint that answered, and is booked there: its
// Attempt.Host names that endpoint. (It named the request's own host.)
func TestResumeOnAnEndpointIsBookedThere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			h := http.Header{"Etag": {`"v1"`}}
			switch {
			case req.URL.Host == "eu.test":
				return ixResp(req, 503), nil
			case req.Header.Get("Range") == "":
				return &http.Response{StatusCode: 200, ContentLength: 10, Header: h,
					Body: &brokenBody{strings.NewReader("hello")}}, nil
			}
			h.Set("Content-Range", "bytes 5-9/10")
			return &http.Response{StatusCode: 206, ContentLength: 5, Header: h,
				Body: io.NopCloser(strings.NewReader("world"))}, nil
		})
		o := &httpretrytest.AttemptLog{}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": failoverPolicy()}, OnAttempt: o.Record}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://eu.test/file", nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, "helloworld", readAll(t, resp.Body))
		attempts := o.Attempts()
		require.Len(t, attempts, 3)
		assert.True(t, attempts[2].Resume)
		assert.Equal(t, "us.test:443", attempts[2].Host, "the resume names the endpoint it went to")
		assert.Equal(t, "us.test", attempts[2].Request.URL.Host)
	})
}
