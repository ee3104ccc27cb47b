package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// upstream is a Go server on a fixed loopback address that a test can kill
// and start again: the address survives, so whatever points at it (nginx,
// a pooled client) sees a server that went away and came back.
type upstream struct {
	addr string
	h    http.Handler
	tls  *tls.Config       // nil: plain HTTP/1.1
	h2   *http.HTTP2Config // HTTP/2 settings, with tls

	mu    sync.Mutex
	srv   *http.Server
	done  chan struct{}   // closed when the running server's Serve returns
	conns *sync.WaitGroup // the running server's connections not yet closed, their goroutines included
}

// startUpstream starts h on a free loopback port; the test's end kills it.
func startUpstream(t testing.TB, h http.Handler, cfg *tls.Config, h2 *http.HTTP2Config) *upstream {
	t.Helper()
	u := &upstream{addr: "127.0.0.1:0", h: h, tls: cfg, h2: h2}
	if err := u.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.kill)
	return u
}

// start serves on u.addr again. Binding the port of a server that just
// closed can race with the kernel's cleanup, so it tries for a second.
func (u *upstream) start() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv != nil {
		return errors.New("upstream already running")
	}
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ln, err = net.Listen("tcp", u.addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return err
	}
	u.addr = ln.Addr().String()
	// Each server counts its own connections: a kill still waiting for
	// the old server's must not see the new one's (a WaitGroup reused
	// while a Wait is under way is a race).
	conns := new(sync.WaitGroup)
	srv := &http.Server{Handler: u.h, ReadHeaderTimeout: 5 * time.Second, HTTP2: u.h2,
		// A connection's goroutine ends right after it reports
		// StateClosed, which can be 500 ms after Close when the server
		// closes a connection whose request body it did not read
		// (closeWriteAndWait): kill waits for that.
		ConnState: func(_ net.Conn, state http.ConnState) {
			switch state {
			case http.StateNew:
				conns.Add(1)
			case http.StateHijacked, http.StateClosed:
				conns.Done()
			}
		}}
	if u.tls != nil {
		srv.TLSConfig = u.tls.Clone()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if u.tls != nil {
			srv.ServeTLS(ln, "", "") // offers h2 and http/1.1 by ALPN
			return
		}
		srv.Serve(ln)
	}()
	u.srv, u.done, u.conns = srv, done, conns
	return nil
}

// kill closes the server at once, and every connection with it, as a
// crash would.
func (u *upstream) kill() {
	u.mu.Lock()
	srv, done, conns := u.srv, u.done, u.conns
	u.srv = nil
	u.mu.Unlock()
	if srv != nil {
		srv.Close()
		<-done
		conns.Wait()
	}
}

// handOver replaces the server by a new one on the same address, as a
// graceful restart does: the old server stops accepting (its listener
// closes first), sends HTTP/2 GOAWAY and lets in-flight requests finish,
// while the new one binds the address as soon as it is free.
func (u *upstream) handOver(ctx context.Context) error {
	u.mu.Lock()
	old, done := u.srv, u.done
	u.srv = nil
	u.mu.Unlock()
	if old == nil {
		return errors.New("upstream not running")
	}
	shut := make(chan error, 1)
	go func() { shut <- old.Shutdown(ctx) }()
	startErr := u.start()
	err := <-shut
	if err != nil {
		old.Close()
	}
	<-done
	return errors.Join(startErr, err)
}
