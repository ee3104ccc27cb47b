package fleet_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// stallProxy forwards TCP to a Redis until stall is set; then it forwards
// nothing more, on its connections or on new ones, as a network that
// drops packets does; drop closes the connections it has.
type stallProxy struct {
	ln    net.Listener
	stall atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newStallProxy(t *testing.T, to string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go p.pipe(up, c)
			go p.pipe(c, up)
		}
	}()
	return p
}

func (p *stallProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.stall.Load() {
			time.Sleep(time.Millisecond) // hold what came: nothing is forwarded
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// A Redis that goes silent costs a call no more than Options.Timeout,
// and is down after three commands in a row missed it,
// with its connection open, or after it broke, when the client's new
// connection's handshake is not answered: the client itself waits for
// its dial and handshake bounds there, past the context's deadline.
func TestSilentRedisCostsACallTheTimeoutAtMost(t *testing.T) {
	srv := fleettest.Start(t)
	proxy := newStallProxy(t, srv.Addr)
	const timeout = 20 * time.Millisecond
	f := processAt(t, proxy.ln.Addr().String(), fleet.Options{Timeout: timeout})
	q := httpretry.Quota{Limit: 10}
	calls := map[string]func(){
		"Take":   func() { f.Take("h:443", q, time.Now(), time.Second) },
		"Record": func() { f.Record("h:443", true) },
		"Hold":   func() { f.Hold("h:443", time.Now().Add(time.Minute), false) },
	}
	for _, broken := range []bool{false, true} {
		for name, call := range calls {
			proxy.stall.Store(false)
			eventually(t, 5*time.Second, func() bool { return f.Stats().Up }, "the fleet never came back")
			proxy.stall.Store(true)
			if broken {
				proxy.drop()
				time.Sleep(20 * time.Millisecond) // the client sees its connection closed
			}
			// One late answer is a pause; three in a row are an outage.
			for range 3 {
				start := time.Now()
				call()
				if took := time.Since(start); took > timeout+100*time.Millisecond {
					t.Errorf("%s took %v with Redis silent (its connection broken: %v), Timeout %v", name, took, broken, timeout)
				}
			}
			if f.Stats().Up {
				t.Errorf("%s: Stats.Up with Redis silent, after three calls", name)
			}
		}
	}
	proxy.stall.Store(false)
}
