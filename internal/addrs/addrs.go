// Package addrs lets a retry go to another of a host name's addresses:
// when a name resolves to several, a dial prefers an address that has not
// failed in this call (Envoy's previous_hosts) and puts last, for a while
// and across calls, one whose connections failed (as OkHttp's
// RouteDatabase postpones failed routes). While every address is well, it
// dials them in the resolver's order, as net.Dialer does: nothing is pinned.
package addrs

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// AvoidFor is how long an address whose connection failed is dialled only
// after the host's others.
const AvoidFor = 30 * time.Second

// maxEntries bounds the addresses a Table remembers: past it, expired
// entries go, and then the table forgets the oldest.
const maxEntries = 4096

// Set is the addresses that failed during one call. The zero value is
// empty; it is safe for concurrent use.
type Set struct {
	mu sync.Mutex
	a  []netip.AddrPort
}

// Add adds ap to s.
func (s *Set) Add(ap netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.a {
		if x == ap {
			return
		}
	}
	s.a = append(s.a, ap)
}

// Has reports whether s holds ap; a nil s holds nothing.
func (s *Set) Has(ap netip.AddrPort) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.a {
		if x == ap {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// WithFailed returns ctx carrying s, the addresses its call saw fail.
func WithFailed(ctx context.Context, s *Set) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

func failedIn(ctx context.Context) *Set {
	s, _ := ctx.Value(ctxKey{}).(*Set)
	return s
}

// Table remembers, across calls, the addresses whose connections failed
// lately. The zero value is empty; it is safe for concurrent use.
type Table struct {
	n     atomic.Int32 // entries, read without mu on every dial
	until atomic.Int64 // when the last entry expires, in Unix nanoseconds: no dial is avoided after it
	mu    sync.Mutex
	m     map[netip.AddrPort]time.Time // avoided until
}

// Failed notes that a connection to ap failed at now: ap is avoided until
// AvoidFor after it.
func (t *Table) Failed(ap netip.AddrPort, now time.Time) {
	if !ap.IsValid() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[netip.AddrPort]time.Time)
	}
	if _, ok := t.m[ap]; !ok && len(t.m) >= maxEntries {
		t.prune(now)
	}
	t.m[ap] = now.Add(AvoidFor)
	t.n.Store(int32(len(t.m)))
	if u := now.Add(AvoidFor).UnixNano(); u > t.until.Load() {
		t.until.Store(u)
	}
}

// active reports whether t may avoid an address at now: it holds an entry
// that has not expired. A table whose entries all expired is emptied.
func (t *Table) active(now time.Time) bool {
	if t == nil || t.n.Load() == 0 {
		return false
	}
	if now.UnixNano() < t.until.Load() {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.UnixNano() < t.until.Load() {
		return true // an entry came meanwhile
	}
	clear(t.m)
	t.n.Store(0)
	return false
}

// prune drops expired entries, or, if none has expired, the one that
// expires first. t.mu is held.
func (t *Table) prune(now time.Time) {
	var first netip.AddrPort
	var firstAt time.Time
	for ap, until := range t.m {
		if !now.Before(until) {
			delete(t.m, ap)
			continue
		}
		if firstAt.IsZero() || until.Before(firstAt) {
			first, firstAt = ap, until
		}
	}
	if len(t.m) >= maxEntries {
		delete(t.m, first)
	}
}

// Avoided reports whether ap failed less than AvoidFor before now.
func (t *Table) Avoided(ap netip.AddrPort, now time.Time) bool {
	if t == nil || t.n.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	until, ok := t.m[ap]
	if ok && !now.Before(until) {
		delete(t.m, ap)
		t.n.Store(int32(len(t.m)))
		return false
	}
	return ok
}

// Len is how many addresses t remembers, expired ones included.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return int(t.n.Load())
}

// Dialer dials a host name's addresses, those that failed last, racing
// the name's two address families as net.Dialer does. A zero Dial or
// Lookup makes DialContext fail.
type Dialer struct {
	// Dial dials one address, as net.Dialer.DialContext.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Lookup resolves a host name, as net.Resolver.LookupNetIP.
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Table is the addresses avoided across calls; nil: none.
	Table *Table
	// Timeout bounds a dial of all of a name's addresses, shared among
	// them, as net.Dialer.Timeout does; 0: only ctx bounds it.
	Timeout time.Duration
}

// minDialTime is the least time one address of several gets, as
// net.Dialer's dialSerial gives each.
const minDialTime = 2 * time.Second

// fallbackDelay is how long the dial of a name's first address family
// goes on alone before the other family's is started beside it: net.Dialer's
// default FallbackDelay (RFC 8305's Happy Eyeballs).
const fallbackDelay = 300 * time.Millisecond

// DialContext dials address. When neither ctx's call nor the table knows a
// failed address that has not expired, or address is not a name with
// several addresses, it is Dial's: net.Dialer's own order and fallbacks,
// Happy Eyeballs included. Otherwise it looks the name up once, as
// net.Dialer would, orders its addresses as the resolver does but those
// the table avoids after the others and those that failed in ctx's call
// last, and dials them as net.Dialer dials a name's addresses: those of
// the first address's family one after another, each with a share of the
// time left, and those of the other family the same way beside them once
// fallbackDelay passed or the first family failed; the first connection
// wins. It notes each address that fails to connect.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	failed := failedIn(ctx)
	if failed == nil && !d.Table.active(time.Now()) {
		return d.Dial(ctx, network, address)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return d.Dial(ctx, network, address)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.Dial(ctx, network, address)
	}
	portN, perr := parsePort(port)
	if perr != nil {
		return d.Dial(ctx, network, address)
	}
	ips, err := d.Lookup(ctx, ipNetwork(network), host)
	if err != nil || len(ips) < 2 {
		return d.Dial(ctx, network, address) // its own lookup reports the error, or there is no choice
	}
	order := Order(ips, portN, failed, d.Table, time.Now())
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	primaries, fallbacks := partition(order)
	if len(fallbacks) == 0 {
		return d.dialSerial(ctx, network, primaries, failed)
	}
	return d.dialParallel(ctx, network, primaries, fallbacks, failed)
}

// partition splits order into the addresses of its first address's family
// and the others, each in order, as net.Dialer's addrList.partition does.
func partition(order []netip.AddrPort) (primaries, fallbacks []netip.AddrPort) {
	first := order[0].Addr().Is4()
	for _, ap := range order {
		if ap.Addr().Is4() == first {
			primaries = append(primaries, ap)
		} else {
			fallbacks = append(fallbacks, ap)
		}
	}
	return primaries, fallbacks
}

// dialParallel races primaries, started at once, against fallbacks,
// started after fallbackDelay or as soon as primaries failed, as
// net.Dialer's dialParallel does: the first connection wins, and the
// other racer is cancelled, its connection closed if it made one. When
// both fail, the error is the primaries'.
func (d *Dialer) dialParallel(ctx context.Context, network string, primaries, fallbacks []netip.AddrPort, failed *Set) (net.Conn, error) {
	type result struct {
		conn    net.Conn
		err     error
		primary bool
	}
	results := make(chan result, 2) // each racer sends once: neither outlives its send
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	race := func(addrs []netip.AddrPort, primary bool) {
		conn, err := d.dialSerial(ctx, network, addrs, failed)
		results <- result{conn, err, primary}
	}
	go race(primaries, true)
	timer := time.NewTimer(fallbackDelay)
	defer timer.Stop()
	var primaryErr, fallbackErr error
	started, pending := false, 1
	for {
		select {
		case <-timer.C:
			if !started {
				started, pending = true, pending+1
				go race(fallbacks, false)
			}
			continue
		case r := <-results:
			pending--
			if r.err == nil {
				if pending > 0 {
					cancel()
					go func() { // the loser: its connection, if it made one, is closed
						if late := <-results; late.conn != nil {
							late.conn.Close()
						}
					}()
				}
				return r.conn, nil
			}
			if r.primary {
				primaryErr = r.err
			} else {
				fallbackErr = r.err
			}
			if r.primary && !started {
				started, pending = true, pending+1
				go race(fallbacks, false)
			}
		}
		if pending == 0 {
			return nil, cmpErr(primaryErr, fallbackErr)
		}
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// dialSerial dials addrs one after another, each with a share of the time
// left, until one connects, noting each that fails to connect.
func (d *Dialer) dialSerial(ctx context.Context, network string, addrs []netip.AddrPort, failed *Set) (net.Conn, error) {
	var last error
	for i, ap := range addrs {
		dctx, cancel := partial(ctx, len(addrs)-i)
		conn, err := d.Dial(dctx, network, ap.String())
		cancel()
		if err == nil {
			return conn, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		d.Table.note(ap)
		if failed != nil {
			failed.Add(ap)
		}
	}
	return nil, last
}

func (t *Table) note(ap netip.AddrPort) {
	if t != nil {
		t.Failed(ap, time.Now())
	}
}

// Order returns ips at port in the order a dial tries them: the resolver's,
// but those the table avoids at now after the others, and those in failed
// last.
func Order(ips []netip.Addr, port uint16, failed *Set, t *Table, now time.Time) []netip.AddrPort {
	var good, avoided, bad []netip.AddrPort
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip.Unmap(), port)
		switch {
		case failed.Has(ap):
			bad = append(bad, ap)
		case t.Avoided(ap, now):
			avoided = append(avoided, ap)
		default:
			good = append(good, ap)
		}
	}
	return append(append(good, avoided...), bad...)
}

// partial returns ctx bounded, when it has a deadline, to a share of the
// time left for one of left addresses, never less than minDialTime.
func partial(ctx context.Context, left int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || left <= 1 {
		return ctx, func() {}
	}
	share := time.Until(deadline) / time.Duration(left)
	share = max(share, minDialTime)
	return context.WithTimeout(ctx, share)
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4", "udp4":
		return "ip4"
	case "tcp6", "udp6":
		return "ip6"
	}
	return "ip"
}

var errPort = errors.New("addrs: bad port")

func parsePort(s string) (uint16, error) {
	n := 0
	if s == "" || len(s) > 5 {
		return 0, errPort
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errPort
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errPort
	}
	return uint16(n), nil
}

// Of returns the remote address in err, an attempt's error, when the
// error names the connection it happened on (a *net.OpError, as a reset,
// a refused dial or a read timeout is).
func Of(err error) (netip.AddrPort, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Addr == nil {
		return netip.AddrPort{}, false
	}
	ap, perr := netip.ParseAddrPort(op.Addr.String())
	if perr != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}
