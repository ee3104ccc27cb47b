package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"golang.org/x/net/http2"
)

// TestH2RefusedStreamXNet is TestH2RefusedStream with the HTTP/2 client of
// golang.org/x/net/http2 (what h2c and some SDKs use) under httpretry.
//
// x/net's http2.StreamError, unlike net/http's bundled copy, has no As
// method; httpretry recognises REFUSED_STREAM by the error's shape, so an
// unkeyed request the server provably did not process is retried. This test
// found the gap when httpretry matched only net/http's error: it checks one
// outcome each, nothing applied twice, and that every request succeeds.
func TestH2RefusedStreamXNet(t *testing.T) {
	cfg, pool := testPKI()
	l := newLedger()
	l.delay.Store(int64(20 * time.Millisecond))
	up := startUpstream(t, l, cfg, &http.HTTP2Config{MaxConcurrentStreams: maxStreams})
	link := slowLink(t, up.addr)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}}}).DialContext(ctx, "tcp", link)
	if err != nil {
		t.Fatal(err)
	}
	// x/net deprecates its Transport in favour of net/http's, but callers
	// (h2c clients, SDKs) still put it under httpretry: that is the case here.
	//lint:ignore SA1019 the test is about x/net's own client
	cc, err := (&http2.Transport{}).NewClientConn(conn)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	rec := &recorder{}
	rt := rec.transport(cc, unkeyed(httpretry.Policy{
		MaxAttempts: 5, Backoff: backoff.Constant(10 * time.Millisecond), NewBudget: httpretry.NoBudget,
	}))
	results := burst(t, rt, "POST", "https://"+link+"/pay", burstSize)

	refused, retried, classes := 0, 0, map[string]int{}
	after := map[string]int{} // how the retries of refused streams ended
	for _, r := range rec.all() {
		var se http2.StreamError
		switch {
		case errors.As(r.err, &se) && se.Code == http2.ErrCodeRefusedStream:
			refused++
			classes[r.class.String()]++
			if r.retry {
				retried++
			}
		case r.n > 1 && r.err != nil:
			after[r.err.Error()]++
		case r.n > 1:
			after[fmt.Sprint(r.status)]++
		}
	}
	if refused == 0 {
		t.Fatal("no stream was refused: the scenario did not happen")
	}
	s := l.stats()
	if s.maxID > 1 {
		t.Errorf("an unkeyed POST applied %d times", s.maxID)
	}
	if int(s.applied) != count200(results) {
		t.Errorf("applied %d, answered 200 %d: a refused stream was applied", s.applied, count200(results))
	}
	if retried != refused {
		t.Errorf("%d of %d unkeyed POSTs refused with REFUSED_STREAM by x/net's client were not retried: classes %v",
			refused-retried, refused, classes)
	}
	// A bare x/net ClientConn is one connection: once it is unusable the
	// retries fail too, with an error that never left the client. A pooled
	// transport would dial again.
	figure(t, "HTTP/2 over TLS", "REFUSED_STREAM from golang.org/x/net/http2's ClientConn (burst of %d unkeyed POSTs): %d streams refused, classified %v, %d retried; the retries ended %v; %d of %d succeeded, each applied once",
		burstSize, refused, formatCounts(classes), retried, formatCounts(after), count200(results), burstSize)
}
