package redisbench

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a tiny loopback TCP fault injector in front of redis-server.
//
//	ModePass      forward bytes both ways
//	ModeDelay     forward, but every chunk is delivered Delay later (each way),
//	              so one round trip costs ~2*Delay; ordering is preserved
//	ModeBlackhole accept and read, never answer
//	ModeJunk      answer every chunk the client sends with Junk bytes instead of
//	              forwarding it (the server never sees the command)
//
// ResetAll closes every live connection with SO_LINGER=0 (the peer sees RST).
type Proxy struct {
	Target string
	ln     net.Listener

	mode  atomic.Int32
	delay atomic.Int64
	junk  atomic.Value // []byte

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

const (
	ModePass int32 = iota
	ModeDelay
	ModeBlackhole
	ModeJunk
)

func NewProxy(target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	p := &Proxy{Target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.junk.Store([]byte("$3\r\nabc\r\n"))
	go p.accept()
	return p
}

func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set switches the mode for all (live and new) connections.
func (p *Proxy) Set(mode int32, delay time.Duration, junk []byte) {
	p.delay.Store(int64(delay))
	if junk != nil {
		p.junk.Store(junk)
	}
	p.mode.Store(mode)
}

func (p *Proxy) Close() { p.ln.Close(); p.ResetAll() }

func (p *Proxy) ResetAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
		delete(p.conns, c)
		n++
	}
	return n
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	p.track(client)
	defer func() { p.untrack(client); client.Close() }()
	server, err := net.Dial("tcp", p.Target)
	if err != nil {
		if tc, ok := client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		return
	}
	p.track(server)
	defer func() { p.untrack(server); server.Close() }()
	done := make(chan struct{}, 2)
	go func() { p.pump(server, client, true); done <- struct{}{} }()
	go func() { p.pump(client, server, false); done <- struct{}{} }()
	<-done
}

type chunk struct {
	b  []byte
	at time.Time
}

// pump copies src->dst. up is true for client->server.
func (p *Proxy) pump(dst, src net.Conn, up bool) {
	q := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for ch := range q {
			if d := time.Until(ch.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	defer close(q)
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := append([]byte(nil), buf[:n]...)
			switch p.mode.Load() {
			case ModePass:
				q <- chunk{b, time.Time{}}
			case ModeDelay:
				q <- chunk{b, time.Now().Add(time.Duration(p.delay.Load()))}
			case ModeBlackhole:
				// drop
			case ModeJunk:
				if up { // answer the client directly with junk
					src.Write(p.junk.Load().([]byte))
				}
				// server->client bytes are dropped while in junk mode
			}
		}
		if err != nil {
			return
		}
	}
}
