package addrs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	a1 = netip.MustParseAddr("127.0.0.2")
	a2 = netip.MustParseAddr("127.0.0.3")
	a3 = netip.MustParseAddr("127.0.0.4")
)

// fakeNet records what a Dialer dials; the addresses in refuse fail.
type fakeNet struct {
	mu      sync.Mutex
	dialled []string
	lookups int
	refuse  map[string]bool
}

func (f *fakeNet) dialer(t *Table) *Dialer {
	return &Dialer{
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.dialled = append(f.dialled, address)
			if f.refuse[address] {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			c1, c2 := net.Pipe()
			c2.Close()
			return c1, nil
		},
		Lookup: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.lookups++
			if host != "multi.test" {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			return []netip.Addr{a1, a2, a3}, nil
		},
		Table: t,
	}
}

func dial(t *testing.T, d *Dialer, ctx context.Context, address string) error {
	t.Helper()
	c, err := d.DialContext(ctx, "tcp", address)
	if c != nil {
		c.Close()
	}
	return err
}

// While nothing failed, a dial is Dial's own, by name: net.Dialer's order
// and fallbacks, no lookup of ours, nothing pinned.
func TestDialWhileAllAreWellIsTheDialersOwn(t *testing.T) {
	f := &fakeNet{}
	d := f.dialer(new(Table))
	for range 3 {
		require.NoError(t, dial(t, d, context.Background(), "multi.test:80"))
	}
	assert.Equal(t, []string{"multi.test:80", "multi.test:80", "multi.test:80"}, f.dialled)
	assert.Zero(t, f.lookups)
}

// An address that failed in this call is dialled last; one the table
// avoids, after the good ones.
func TestDialOrder(t *testing.T) {
	f := &fakeNet{}
	tab := new(Table)
	d := f.dialer(tab)
	var failed Set
	failed.Add(netip.AddrPortFrom(a1, 80))
	ctx := WithFailed(context.Background(), &failed)
	require.NoError(t, dial(t, d, ctx, "multi.test:80"))
	assert.Equal(t, []string{"127.0.0.3:80"}, f.dialled, "the first address that did not fail in the call")

	f.dialled = nil
	tab.Failed(netip.AddrPortFrom(a2, 80), time.Now())
	require.NoError(t, dial(t, d, context.Background(), "multi.test:80"))
	assert.Equal(t, []string{"127.0.0.2:80"}, f.dialled, "another call: a1 is fine for it; a2 is avoided")

	f.dialled = nil
	require.NoError(t, dial(t, d, ctx, "multi.test:80"))
	assert.Equal(t, []string{"127.0.0.4:80"}, f.dialled, "the call's failure and the table's together")

	assert.Equal(t, []netip.AddrPort{netip.AddrPortFrom(a2, 443), netip.AddrPortFrom(a3, 443), netip.AddrPortFrom(a1, 443)},
		Order([]netip.Addr{a1, a2, a3}, 443, &Set{a: []netip.AddrPort{netip.AddrPortFrom(a1, 443)}}, tab, time.Now()),
		"ports count: the table avoids a2 at port 80 only")
}

// A dial that fails goes on to the next address, and notes the one that
// failed, in the call and in the table.
func TestDialFallsBackAndNotes(t *testing.T) {
	f := &fakeNet{refuse: map[string]bool{"127.0.0.3:80": true}}
	tab := new(Table)
	d := f.dialer(tab)
	var failed Set
	failed.Add(netip.AddrPortFrom(a1, 80))
	require.NoError(t, dial(t, d, WithFailed(context.Background(), &failed), "multi.test:80"))
	assert.Equal(t, []string{"127.0.0.3:80", "127.0.0.4:80"}, f.dialled)
	assert.True(t, failed.Has(netip.AddrPortFrom(a2, 80)))
	assert.True(t, tab.Avoided(netip.AddrPortFrom(a2, 80), time.Now()))

	f.refuse = map[string]bool{"127.0.0.2:80": true, "127.0.0.3:80": true, "127.0.0.4:80": true}
	f.dialled = nil
	err := dial(t, d, WithFailed(context.Background(), &failed), "multi.test:80")
	var op *net.OpError
	require.ErrorAs(t, err, &op, "the last dial's error")
	assert.Len(t, f.dialled, 3)
}

// An IP literal, a name with one address, a bad address or a failed
// lookup: Dial's own.
func TestDialPassesThrough(t *testing.T) {
	f := &fakeNet{}
	tab := new(Table)
	tab.Failed(netip.AddrPortFrom(a1, 80), time.Now())
	d := f.dialer(tab)
	for _, addr := range []string{"127.0.0.2:80", "[::1]:80", "other.test:80", "nohost", "multi.test:http"} {
		_ = dial(t, d, context.Background(), addr)
	}
	assert.Equal(t, []string{"127.0.0.2:80", "[::1]:80", "other.test:80", "nohost", "multi.test:http"}, f.dialled)
}

// A cancelled context stops the dials at the first failure, and notes
// nothing against the address.
func TestDialCancelled(t *testing.T) {
	f := &fakeNet{refuse: map[string]bool{"127.0.0.2:80": true}}
	tab := new(Table)
	d := f.dialer(tab)
	ctx, cancel := context.WithCancel(WithFailed(context.Background(), new(Set)))
	cancel()
	err := dial(t, d, ctx, "multi.test:80")
	require.Error(t, err)
	assert.Len(t, f.dialled, 1)
	assert.False(t, tab.Avoided(netip.AddrPortFrom(a1, 80), time.Now()))
}

// Each of several addresses gets a share of the time left, at least
// minDialTime; the whole is bounded by Timeout.
func TestPartialDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, c := partial(ctx, 3)
	defer c()
	dl, ok := p.Deadline()
	require.True(t, ok)
	assert.InDelta(t, float64(10*time.Second), float64(time.Until(dl)), float64(time.Second))

	short, c2 := context.WithTimeout(context.Background(), time.Second)
	defer c2()
	p, c3 := partial(short, 3)
	defer c3()
	dl, _ = p.Deadline()
	sdl, _ := short.Deadline()
	assert.Equal(t, sdl, dl, "never past the context's own deadline")

	p, c4 := partial(context.Background(), 3)
	defer c4()
	_, ok = p.Deadline()
	assert.False(t, ok, "no deadline, no share")
}

// The table forgets an address AvoidFor after its failure, and holds at
// most maxEntries.
func TestTableExpiresAndIsBounded(t *testing.T) {
	var tab Table
	now := time.Now()
	ap := netip.AddrPortFrom(a1, 80)
	tab.Failed(ap, now)
	assert.True(t, tab.Avoided(ap, now.Add(AvoidFor-time.Second)))
	assert.False(t, tab.Avoided(ap, now.Add(AvoidFor)))
	assert.Zero(t, tab.Len(), "expired entries go when looked at")

	for i := range maxEntries + 100 {
		tab.Failed(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 80), now.Add(time.Duration(i)))
	}
	assert.Equal(t, maxEntries, tab.Len())
	tab.Failed(netip.AddrPort{}, now) // not an address: ignored
	assert.Equal(t, maxEntries, tab.Len())
	var nilTable *Table
	assert.False(t, nilTable.Avoided(ap, now))
	assert.Zero(t, nilTable.Len())
}

// Of reads the remote address of an error that names its connection,
// through wrapping, and nothing from others.
func TestOf(t *testing.T) {
	op := &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 8080}, Err: syscall.ECONNRESET}
	ap, ok := Of(fmt.Errorf("wrapped: %w", op))
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddrPort("127.0.0.2:8080"), ap)
	v4in6 := &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.2"), Port: 1}}
	ap, ok = Of(v4in6)
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddrPort("127.0.0.2:1"), ap)
	for _, err := range []error{nil, errors.New("EOF"), &net.OpError{Op: "dial"}, &net.OpError{Op: "dial", Addr: &net.UnixAddr{Name: "/x"}}} {
		_, ok := Of(err)
		assert.False(t, ok, "%v", err)
	}
}

var (
	v6 = netip.MustParseAddr("2001:db8::1")
	v4 = netip.MustParseAddr("192.0.2.1")
)

// dualStack is a name with an IPv6 and an IPv4 address, in that order;
// dials to the addresses in holes hang until their context ends, as to a
// black-holed route. It records the addresses (or the name) dialled.
func dualStack(tab *Table, holes ...netip.Addr) (*Dialer, *[]string) {
	var mu sync.Mutex
	var dialled []string
	return &Dialer{
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, address)
			mu.Unlock()
			ap, err := netip.ParseAddrPort(address)
			if err == nil && slices.Contains(holes, ap.Addr()) {
				<-ctx.Done()
				return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
			}
			c1, c2 := net.Pipe()
			c2.Close()
			return c1, nil
		},
		Lookup: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			return []netip.Addr{v6, v4}, nil
		},
		Table:   tab,
		Timeout: 30 * time.Second,
	}, &dialled
}

// A name whose addresses never failed keeps net.Dialer's dual-stack race
// even while the table remembers another name's failure: with its IPv6
// black-holed, the dial takes the IPv4 address after the 300 ms fallback
// delay, as net.Dialer does. (Any entry in the table, even an expired
// one, sent every name through a serial loop: 15 s of the 30 s timeout on
// the black hole first.)
func TestDialKeepsHappyEyeballs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := new(Table)
		tab.Failed(netip.AddrPortFrom(a1, 443), time.Now()) // another name's address
		d, _ := dualStack(tab, v6)
		began := time.Now()
		require.NoError(t, dial(t, d, context.Background(), "dual.test:443"))
		assert.LessOrEqual(t, time.Since(began), fallbackDelay, "as net.Dialer: the other family after 300 ms")
	})
}

// Where the table avoids an address of the name, the dial puts it last
// and still races the other family: never slower than net.Dialer.
func TestDialAvoidingRacesTheFamilies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := new(Table)
		tab.Failed(netip.AddrPortFrom(v6, 443), time.Now())
		d, dialled := dualStack(tab, v6)
		began := time.Now()
		require.NoError(t, dial(t, d, context.Background(), "dual.test:443"))
		assert.Zero(t, time.Since(began), "the avoided IPv6 address after the IPv4 one")
		assert.Equal(t, []string{"192.0.2.1:443"}, *dialled)

		// The IPv4 address failed lately and the IPv6 route is a black
		// hole: IPv6 first, as avoided last, then IPv4 after the fallback
		// delay, where a serial dial waited 15 s.
		tab2 := new(Table)
		tab2.Failed(netip.AddrPortFrom(v4, 443), time.Now())
		d, _ = dualStack(tab2, v6)
		began = time.Now()
		require.NoError(t, dial(t, d, context.Background(), "dual.test:443"))
		assert.Equal(t, fallbackDelay, time.Since(began))
	})
}

// An entry that expired no longer takes a dial off net.Dialer's own path,
// and is dropped.
func TestExpiredEntriesLeaveTheDialersOwnPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := new(Table)
		tab.Failed(netip.AddrPortFrom(v6, 443), time.Now())
		time.Sleep(AvoidFor)
		d, dialled := dualStack(tab)
		require.NoError(t, dial(t, d, context.Background(), "dual.test:443"))
		assert.Equal(t, []string{"dual.test:443"}, *dialled, "the name, dialled by net.Dialer")
		assert.Zero(t, tab.Len(), "the expired entry is dropped")
	})
}
