//go:build go1.26

package httpretry_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connServer is a real server that numbers its connections in the order
// they arrive and counts them as they open and close.
type connServer struct {
	*httptest.Server
	opened, closed atomic.Int32
	numbers        sync.Map // remote address → the connection's number
}

// What a connServer speaks.
type connProto int

const (
	h1    connProto = iota // HTTP/1.1
	h1TLS                  // HTTP/1.1 over TLS
	h2                     // HTTP/2 over TLS
)

// startConnServer starts a server speaking proto; handle gets the number
// of the request's connection, from 1.
func startConnServer(t *testing.T, proto connProto, handle func(conn int32, w http.ResponseWriter, r *http.Request)) *connServer {
	t.Helper()
	s := &connServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.numbers.Load(r.RemoteAddr)
		handle(n.(int32), w, r)
	})
	connState := func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.numbers.Store(c.RemoteAddr().String(), s.opened.Add(1))
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	if proto == h1TLS {
		s.Server = httptest.NewUnstartedServer(h)
		s.Config.ConnState = connState
		s.StartTLS() // without EnableHTTP2, it offers HTTP/1.1 only
		t.Cleanup(s.Close)
		return s
	}
	s.Server = startServer(t, h, proto == h2, connState)
	return s
}

// base returns a transport of the server's own client, cloned.
func (s *connServer) base(t *testing.T) *http.Transport {
	tr := s.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// freshConnLoad sends n requests through rt, from 8 goroutines, half of
// them GETs and half POSTs with a body (which the Transport keys), and
// returns how many succeeded within one retry and how many failed.
func freshConnLoad(t *testing.T, rt *httpretry.Transport, url string, n int) (withinOneRetry, failed int) {
	t.Helper()
	var attempts sync.Map // *http.Request → attempts of its call
	rt.OnCall = func(c httpretry.Call) { attempts.Store(c.Request, c.Attempts) }
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int32{}
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				var req *http.Request
				if i%2 == 0 {
					req, _ = http.NewRequest(http.MethodGet, url, nil)
				} else {
					req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader("payment"))
				}
				resp, err := rt.RoundTrip(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					ok = ok && readAll(t, resp.Body) == "ok"
					resp.Body.Close()
				}
				a, _ := attempts.Load(req)
				mu.Lock()
				switch {
				case !ok:
					failed++
					t.Logf("%s failed after %v attempts: %v", req.Method, a, err)
				case a.(int) <= 2:
					withinOneRetry++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return withinOneRetry, failed
}

// An HTTP/2 connection that stops answering its streams stays in
// net/http's pool (it still answers PINGs): every retry that went back
// to it timed out again. A retry after an attempt timeout on it gets a
// connection of its own, closed once its response body is.
func TestRetryAfterWedgedH2ConnUsesAFreshConn(t *testing.T) {
	var wedged atomic.Bool
	var onWedged atomic.Int32 // streams the wedged connection got
	srv := startConnServer(t, h2, func(conn int32, w http.ResponseWriter, r *http.Request) {
		if conn == 1 && wedged.Load() {
			onWedged.Add(1)
			<-r.Context().Done() // the stream is never answered
			return
		}
		w.Write([]byte("ok"))
	})
	rt := &httpretry.Transport{Base: srv.base(t), Policy: httpretry.Policy{
		AttemptTimeout: 300 * time.Millisecond, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}}

	// The first connection serves a request, so that the pool holds it,
	// and then stops answering.
	resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil).WithContext(context.Background()))
	require.NoError(t, err)
	readAll(t, resp.Body)
	resp.Body.Close()
	wedged.Store(true)

	const n = 100
	ok, failed := freshConnLoad(t, rt, srv.URL, n)
	assert.Zero(t, failed)
	// What the Transport decides, whatever the machine's load: each call's
	// first attempt took the pooled connection, and no retry went back to
	// it. How many succeeded within one retry depends on the load too: a
	// retry whose answer over its own new connection takes longer than
	// AttemptTimeout (a starved CPU under the race detector) is retried on
	// another new one, so it is logged, not asserted (the e2e suite's
	// TestWedgedConnection asserts it, with room for its machine).
	assert.Equal(t, int32(n), onWedged.Load(), "the wedged connection got each call's first attempt and no retry")
	t.Logf("%d of %d succeeded within one retry; %d connections opened", ok, n, srv.opened.Load())
	// The wedged connection stays pooled; every connection of a retry's own
	// is closed with its response body.
	assert.Eventually(t, func() bool { return srv.closed.Load() == srv.opened.Load()-1 },
		5*time.Second, 10*time.Millisecond, "opened %d, closed %d", srv.opened.Load(), srv.closed.Load())
}

// A stream reset on a connection that lives on (here INTERNAL_ERROR from a
// handler that aborts; REFUSED_STREAM has the same shape) leaves the
// connection pooled: the retry gets one of its own.
func TestRetryAfterH2StreamResetUsesAFreshConn(t *testing.T) {
	srv := startConnServer(t, h2, func(conn int32, w http.ResponseWriter, r *http.Request) {
		if conn == 1 {
			panic(http.ErrAbortHandler) // RST_STREAM, the connection lives on
		}
		w.Write([]byte("ok"))
	})
	rt := &httpretry.Transport{Base: srv.base(t), Policy: httpretry.Policy{
		Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}}
	const n = 100
	ok, failed := freshConnLoad(t, rt, srv.URL, n)
	assert.Zero(t, failed)
	assert.GreaterOrEqual(t, ok*100, 99*n, "succeeded within one retry: %d of %d", ok, n)
	assert.Eventually(t, func() bool { return srv.closed.Load() == srv.opened.Load()-1 },
		5*time.Second, 10*time.Millisecond, "opened %d, closed %d", srv.opened.Load(), srv.closed.Load())
}

// net/http closes an HTTP/1.1 connection whose request failed, so the
// retry's connection from the pool is a new one: nothing to do. The
// connection that resets is the one the first request arrived on: with 8
// requests at once, the first connection accepted can be a dial the pool
// never uses (it failed 16 times in 200 when it was connection 1).
func TestRetryAfterH1ConnResetGetsAnotherConn(t *testing.T) {
	var onFirst, first atomic.Int32
	srv := startConnServer(t, h1, func(conn int32, w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(0, conn) || first.Load() == conn {
			onFirst.Add(1)
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close() // a reset
			}
			return
		}
		w.Write([]byte("ok"))
	})
	rt := &httpretry.Transport{Base: srv.base(t), Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
	const n = 40
	ok, failed := freshConnLoad(t, rt, srv.URL, n)
	assert.Zero(t, failed)
	assert.Equal(t, n, ok)
	assert.Equal(t, int32(1), onFirst.Load(), "the reset connection served one request")
}

// Which protocol a timed-out attempt spoke is not noted (it would cost
// every attempt an allocation): over HTTP/1.1 with TLS, the retry after a
// timeout has a connection of its own too, an HTTP/1.1 one, closed with
// its body.
func TestRetryAfterH1TimeoutOverTLS(t *testing.T) {
	var hung atomic.Bool
	srv := startConnServer(t, h1TLS, func(conn int32, w http.ResponseWriter, r *http.Request) {
		if hung.CompareAndSwap(false, true) {
			<-r.Context().Done()
			return
		}
		w.Write([]byte(r.Proto))
	})
	rt := &httpretry.Transport{Base: srv.base(t), Policy: httpretry.Policy{
		AttemptTimeout: 200 * time.Millisecond, Backoff: backoff.Constant(0)}}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1", readAll(t, resp.Body))
	resp.Body.Close()
	assert.Eventually(t, func() bool { return srv.opened.Load() == 2 && srv.closed.Load() == 2 },
		5*time.Second, 10*time.Millisecond, "opened %d, closed %d", srv.opened.Load(), srv.closed.Load())
}

// A Base the Transport cannot look into keeps every attempt on the pool's
// connections: the retries go back to the connection that failed them,
// whether it resets their streams or stopped answering.
func TestOpaqueBaseKeepsThePoolsConnection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		handle  func(w http.ResponseWriter, r *http.Request)
	}{
		{"stream reset", 0, func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }},
		{"wedged", 200 * time.Millisecond, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startConnServer(t, h2, func(conn int32, w http.ResponseWriter, r *http.Request) {
				if conn == 1 {
					tc.handle(w, r)
					return
				}
				w.Write([]byte("ok"))
			})
			tr := srv.base(t)
			var call httpretry.Call
			rt := &httpretry.Transport{Base: httpretrytest.RoundTripFunc(tr.RoundTrip),
				Policy: httpretry.Policy{AttemptTimeout: tc.timeout, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget},
				OnCall: func(c httpretry.Call) { call = c }}
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			_, err := rt.RoundTrip(req)
			require.Error(t, err)
			assert.Equal(t, 4 /* the default MaxAttempts */, call.Attempts)
			assert.Equal(t, int32(1), srv.opened.Load(), "every attempt on the first connection")
		})
	}
}

// The dial of a retry's connection of its own is not charged to the
// retry's AttemptTimeout, which is for its answer, as on the pooled
// connection the first attempt had already open: a dial and an answer that
// each take most of it succeed. (Under CPU load a TLS handshake took most
// of a 300 ms AttemptTimeout, and the retry timed out waiting for an
// answer that was on its way.)
func TestRetrysDialIsNotChargedToItsAttemptTimeout(t *testing.T) {
	var wedged atomic.Bool
	const timeout, slow = time.Second, 600 * time.Millisecond
	srv := startConnServer(t, h2, func(conn int32, w http.ResponseWriter, r *http.Request) {
		if conn == 1 && wedged.Load() {
			<-r.Context().Done()
			return
		}
		if conn > 1 {
			time.Sleep(slow)
		}
		w.Write([]byte("ok"))
	})
	tr := srv.base(t)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if wedged.Load() {
			time.Sleep(slow)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	var attempts []httpretry.Attempt
	rt := &httpretry.Transport{Base: tr, Policy: httpretry.Policy{AttemptTimeout: timeout,
		Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget},
		OnAttempt: func(a httpretry.Attempt) { attempts = append(attempts, a) }}
	getOK(t, rt, srv.URL) // the first connection is pooled
	wedged.Store(true)
	attempts = nil
	getOK(t, rt, srv.URL)
	require.Len(t, attempts, 2)
	assert.ErrorIs(t, attempts[0].Err, httpretry.ErrAttemptTimeout)
}

// A retry whose connection of its own cannot be dialled fails with the
// dial's error: it does not go back to the pooled connection that stopped
// answering, and the retry after it dials again.
func TestRetrysFailedDialDoesNotFallBackToThePool(t *testing.T) {
	var wedged atomic.Bool
	var onWedged atomic.Int32
	srv := startConnServer(t, h2, func(conn int32, w http.ResponseWriter, r *http.Request) {
		if conn == 1 && wedged.Load() {
			onWedged.Add(1)
			<-r.Context().Done()
			return
		}
		w.Write([]byte("ok"))
	})
	tr := srv.base(t)
	var dials atomic.Int32
	errRefused := errors.New("dial refused by the test")
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 2 {
			return nil, errRefused
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	var attempts []httpretry.Attempt
	rt := &httpretry.Transport{Base: tr, Policy: httpretry.Policy{AttemptTimeout: 200 * time.Millisecond,
		Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget},
		OnAttempt: func(a httpretry.Attempt) { attempts = append(attempts, a) }}
	getOK(t, rt, srv.URL) // the first connection is pooled
	wedged.Store(true)
	attempts = nil
	getOK(t, rt, srv.URL)
	require.Len(t, attempts, 3)
	assert.ErrorIs(t, attempts[1].Err, errRefused)
	assert.Equal(t, int32(1), onWedged.Load(), "only the first attempt went to the wedged connection")
}

// getOK sends a GET through rt and requires an "ok".
func getOK(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp.Body))
	resp.Body.Close()
}
