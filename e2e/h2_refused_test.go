package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// burst sends n requests at once through rt and returns their results.
// Each carries its own X-Request-Id.
func burst(t testing.TB, rt http.RoundTripper, method, url string, n int) []result {
	t.Helper()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]result, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			payload := ""
			if method != "GET" {
				payload = fmt.Sprintf("amount=%d", i)
			}
			<-start
			results[i], errs[i] = send(ctx, rt, method, url, payload,
				http.Header{"X-Request-Id": {fmt.Sprintf("%s-%d", method, i)}})
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return results
}

// refusedStreams counts the attempts that ended in RST_STREAM REFUSED_STREAM
// and checks that each was classified as not processed.
func refusedStreams(t testing.TB, recs []attemptRec) int {
	t.Helper()
	n := 0
	for _, r := range recs {
		var se h2StreamError
		if errors.As(r.err, &se) && se.Code == refusedStream {
			n++
			if r.class != httpretry.ClassNotProcessed {
				t.Errorf("REFUSED_STREAM classified %v, want not-processed", r.class)
			}
		}
	}
	return n
}

// A Go HTTP/2 server with MaxConcurrentStreams 2 answers streams above the
// limit with RST_STREAM REFUSED_STREAM while the client has not yet
// acknowledged its SETTINGS (RFC 9113 § 5.1.2): a burst of requests on a
// fresh connection over a link with a long round trip. Once the client has
// the SETTINGS it keeps to the limit and queues.
const (
	burstSize  = 16
	maxStreams = 2
)

// slowLink returns the address of a toxiproxy proxy to addr whose answers
// take 120 ms: the server's SETTINGS arrive well after the client's burst.
func slowLink(t testing.TB, addr string) string {
	t.Helper()
	p := startToxiproxy(t).proxy(t, addr)
	f := toxic{name: "rtt", typ: "latency", stream: "downstream", attrs: toxiclient.Attributes{"latency": 120}}
	if err := f.apply(p); err != nil {
		t.Fatal(err)
	}
	return p.Listen
}

// TestH2RefusedStream sends a burst on one fresh HTTP/2 connection (no pool,
// no retry loop under httpretry): the refused streams reach httpretry,
// which retries them whatever the method, since the server provably did
// not process them. Every request succeeds; nothing is applied twice.
func TestH2RefusedStream(t *testing.T) {
	cfg, _ := testPKI()
	for _, tc := range []struct {
		name, method string
		unkeyed      bool
		applied      int
	}{
		{"GETs", "GET", false, 0},
		{"keyed POSTs", "POST", false, burstSize},
		{"unkeyed POSTs", "POST", true, burstSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			l.delay.Store(int64(20 * time.Millisecond))
			up := startUpstream(t, l, cfg, &http.HTTP2Config{MaxConcurrentStreams: maxStreams})
			link := slowLink(t, up.addr)
			rec := &recorder{}
			p := httpretry.Policy{
				MaxAttempts: 5, Backoff: backoff.Constant(10 * time.Millisecond), NewBudget: httpretry.NoBudget,
			}
			if tc.unkeyed {
				p = unkeyed(p)
			}
			rt := rec.transport(newOneConn(t, link), p)
			results := burst(t, rt, tc.method, "https://"+link+"/pay", burstSize)
			for i, r := range results {
				if r.status != 200 {
					t.Errorf("request %d: status %d, error %v", i, r.status, r.err)
				}
			}
			refused := refusedStreams(t, rec.all())
			if refused == 0 {
				t.Fatalf("no stream was refused: the scenario did not happen: %+v", rec.all())
			}
			s := l.stats()
			if s.maxKey > 1 || s.maxID > 1 || int(s.applied) != tc.applied {
				t.Errorf("ledger %+v: want %d payments, each applied once", s, tc.applied)
			}
			figure(t, "HTTP/2 over TLS", "REFUSED_STREAM reaching httpretry (one connection, MaxConcurrentStreams %d, burst of %d %s): %d streams refused, all retried as not processed, %d/%d succeeded, applied %d (most for one request: %d)",
				maxStreams, burstSize, tc.name, refused, count200(results), burstSize, s.applied, max(s.maxKey, s.maxID))
		})
	}
}

func count200(results []result) int {
	n := 0
	for _, r := range results {
		if r.status == 200 {
			n++
		}
	}
	return n
}

// TestH2RefusedStreamRetriedInsideNetHTTP makes the same burst through a
// pooled http.Transport: net/http retries REFUSED_STREAM itself, for any
// method whose body it can rewind (httpretry gives every attempt a
// GetBody), up to 6 times with a backoff of 1 s, 2 s, 4 s... httpretry sees
// none of it: the figures count the hidden retries apart.
func TestH2RefusedStreamRetriedInsideNetHTTP(t *testing.T) {
	cfg, _ := testPKI()
	l := newLedger()
	l.delay.Store(int64(20 * time.Millisecond))
	up := startUpstream(t, l, cfg, &http.HTTP2Config{MaxConcurrentStreams: maxStreams})
	rec := &recorder{}
	hidden := &hiddenRetries{base: h2Base(t)}
	rt := rec.transport(hidden, unkeyed(httpretry.Policy{
		MaxAttempts: 5, Backoff: backoff.Constant(10 * time.Millisecond), NewBudget: httpretry.NoBudget,
	}))
	start := time.Now()
	results := burst(t, rt, "POST", "https://"+slowLink(t, up.addr)+"/pay", 2*burstSize)
	elapsed := time.Since(start)
	recs := rec.all()
	for i, r := range results {
		if r.status != 200 {
			t.Errorf("request %d: status %d, error %v", i, r.status, r.err)
		}
	}
	s := l.stats()
	if s.maxID > 1 || int(s.applied) != 2*burstSize {
		t.Errorf("ledger %+v: want each of the %d unkeyed POSTs applied once", s, 2*burstSize)
	}
	if hidden.n.Load() == 0 {
		t.Error("net/http retried nothing: the scenario did not happen")
	}
	figure(t, "HTTP/2 over TLS", "REFUSED_STREAM inside net/http (pooled http.Transport, burst of %d unkeyed POSTs): httpretry saw %d attempts and %d refused streams; net/http retried %d times on its own, unseen; %d/%d succeeded, applied %d, the burst took %v",
		2*burstSize, len(recs), refusedStreams(t, recs), hidden.n.Load(), count200(results), 2*burstSize, s.applied, elapsed.Round(time.Millisecond))
}
