package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// fakeDNS answers A queries for its names with their addresses, in the
// order given, and NXDOMAIN for any other name: a resolver the test
// controls, on loopback UDP.
type fakeDNS struct {
	conn  net.PacketConn
	names map[string][]netip.Addr // "multi.test." → addresses
	done  chan struct{}
}

func newFakeDNS(t *testing.T, names map[string][]netip.Addr) *fakeDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &fakeDNS{conn: conn, names: names, done: make(chan struct{})}
	go d.serve()
	t.Cleanup(func() { conn.Close(); <-d.done })
	return d
}

func (d *fakeDNS) serve() {
	defer close(d.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, err := d.answer(buf[:n]); err == nil {
			d.conn.WriteTo(out, from)
		}
	}
}

func (d *fakeDNS) answer(q []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, err
	}
	question, err := p.Question()
	if err != nil {
		return nil, err
	}
	addrs, known := d.names[question.Name.String()]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(question); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if question.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 0}
			if err := b.AResource(rr, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// useResolver makes net.DefaultResolver ask d, for the test's duration:
// every client in the process, httpretry's default Base and the peers',
// resolves names through it, as through a real resolver.
func useResolver(t *testing.T, d *fakeDNS) {
	old := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", d.conn.LocalAddr().String())
	}}
	t.Cleanup(func() { net.DefaultResolver = old })
}

// resetter accepts connections and resets each once its request's first
// bytes arrive: a dead backend behind a load balancer's address.
type resetter struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func newResetter(t *testing.T, addr string) *resetter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	r := &resetter{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				c.Read(make([]byte, 1))
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	return r
}

// threeAddresses listens on 127.0.0.2, .3 and .4 at one port: the first
// resets every connection, the others serve h. It retries with another
// port if one of the three is taken.
func threeAddresses(t *testing.T, h http.Handler) (port int, bad *resetter, good []*http.Server) {
	t.Helper()
	for range 20 {
		ln2, err := net.Listen("tcp", "127.0.0.2:0")
		require.NoError(t, err)
		port = ln2.Addr().(*net.TCPAddr).Port
		ln2.Close()
		ln3, err3 := net.Listen("tcp", fmt.Sprintf("127.0.0.3:%d", port))
		ln4, err4 := net.Listen("tcp", fmt.Sprintf("127.0.0.4:%d", port))
		if err3 != nil || err4 != nil {
			for _, l := range []net.Listener{ln3, ln4} {
				if l != nil {
					l.Close()
				}
			}
			continue
		}
		bad = newResetter(t, fmt.Sprintf("127.0.0.2:%d", port))
		for _, ln := range []net.Listener{ln3, ln4} {
			srv := &http.Server{Handler: h}
			go srv.Serve(ln)
			good = append(good, srv)
			t.Cleanup(func() { srv.Close() })
		}
		return port, bad, good
	}
	t.Fatal("no port free on 127.0.0.2, .3 and .4")
	return
}

// TestOneBadAddress: a name with three addresses, the first of which
// resets every connection. httpretry's default Base dials another address
// for the retry and, for a while, puts the bad one last for every call;
// a client that dials in the resolver's order, as net.Dialer does, goes
// back to it on every new connection.
func TestOneBadAddress(t *testing.T) {
	dns := newFakeDNS(t, map[string][]netip.Addr{
		"multi.test.": {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")},
	})
	useResolver(t, dns)
	led := newLedger()
	port, bad, _ := threeAddresses(t, led)
	url := fmt.Sprintf("http://multi.test:%d/pay", port)

	var attempts atomic.Int64
	tr := &httpretry.Transport{
		Policy:    httpretry.Policy{Backoff: backoff.Constant(time.Millisecond)},
		OnAttempt: func(httpretry.Attempt) { attempts.Add(1) },
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	const calls, workers = 2000, 8
	var ok, next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					return
				}
				method := http.MethodGet
				var body io.Reader
				if i%2 == 1 {
					method, body = http.MethodPost, strings.NewReader(fmt.Sprintf(`{"amount":%d}`, i))
				}
				req, _ := http.NewRequest(method, url, body)
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err == nil && resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	st := led.stats()
	total := attempts.Load()
	perCall := float64(total) / float64(calls)
	figure(t, "Another address", "httpretry (default Base), %d calls (GET and keyed POST alternately) from %d goroutines to a name with 3 addresses, the first of which resets every connection: %d succeeded (%.2f %%), %d attempts (%.3f per call); the bad address took %d connections; keyed POSTs applied once each (most applications of one key: %d)",
		calls, workers, ok.Load(), 100*float64(ok.Load())/calls, total, perCall, bad.conns.Load(), st.maxKey)
	assert.GreaterOrEqual(t, float64(ok.Load())/calls, 0.999, "≥ 99.9 %% succeed")
	assert.LessOrEqual(t, perCall, 1.05, "≤ 1.05 attempts per call")
	assert.LessOrEqual(t, st.maxKey, 1, "no keyed POST applied twice")
	assert.Less(t, bad.conns.Load(), int64(workers*2), "the bad address is avoided once known: at most one connection per goroutine's first call, and a few more")
	assert.Equal(t, calls/2, st.keys, "every keyed POST arrived")
}

// TestOneBadAddressPeers: the same name and servers through clients that
// dial in the resolver's order. Each gets its default attempts with waits
// of 1 ms (their defaults are seconds) and sends a few calls: each call's
// every connection goes to the first address, which resets it.
func TestOneBadAddressPeers(t *testing.T) {
	dns := newFakeDNS(t, map[string][]netip.Addr{
		"multi.test.": {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")},
	})
	useResolver(t, dns)
	port, bad, _ := threeAddresses(t, newLedger())
	url := fmt.Sprintf("http://multi.test:%d/", port)
	for _, p := range addressPeers() {
		t.Run(p.name, func(t *testing.T) {
			before := bad.conns.Load()
			ok := 0
			const calls = 20
			for range calls {
				if p.get(url) == nil {
					ok++
				}
			}
			p.close()
			figure(t, "Another address", "%s (%s), the same name: %d of %d calls succeeded; the bad address took %d connections",
				p.name, p.setup, ok, calls, bad.conns.Load()-before)
			assert.Less(t, ok, calls, "a client that dials in the resolver's order meets the bad address")
		})
	}
}
