package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// TestH2GoawayUnderLoad disrupts the HTTP/2 server three times while 32
// clients keep it busy. "graceful" is a graceful restart: the old server
// (http.Server.Shutdown) stops accepting, sends GOAWAY and lets in-flight
// streams finish while a new one takes over the address. "crash" is
// http.Server.Close, every connection cut with its in-flight streams, and
// a new server 50 ms later.
//
// A quarter of the requests are POSTs without an Idempotency-Key (a second
// Transport, keys disabled, over the same connection pool): httpretry may
// retry one only when the server provably did not process it (here: the
// dial refused while the server was down). GETs and keyed POSTs are retried
// after any transient failure and must all succeed.
func TestH2GoawayUnderLoad(t *testing.T) {
	for _, mode := range []string{"graceful", "crash"} {
		t.Run(mode, func(t *testing.T) { goawayUnderLoad(t, mode) })
	}
}

func goawayUnderLoad(t *testing.T, mode string) {
	const (
		total   = 1200
		workers = 32
	)
	cfg, _ := testPKI()
	l := newLedger()
	l.delay.Store(int64(2 * time.Millisecond))
	up := startUpstream(t, l, cfg, nil)
	url := "https://" + up.addr + "/pay"
	rec := &recorder{}
	hidden := &hiddenRetries{base: h2Base(t)}
	policy := httpretry.Policy{
		MaxAttempts: 12, Backoff: backoff.Constant(25 * time.Millisecond), NewBudget: httpretry.NoBudget,
	}
	keyed, unkeyedRT := rec.transport(hidden, policy), rec.transport(hidden, unkeyed(policy))

	var (
		next, finished atomic.Int64
		mu             sync.Mutex
		outcomes       = map[string]int{} // "GET 200", "unkeyed POST error", …
		errs           = map[string]int{} // the errors, by their text
		unkeyedOK      []string           // ids of unkeyed POSTs answered 200
		unkeyedFailed  []string           // ids of unkeyed POSTs that ended in an error
		wg             sync.WaitGroup
		stopped        = make(chan struct{})
	)
	deadline := time.Now().Add(90 * time.Second)
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < total && time.Now().Before(deadline); i = next.Add(1) - 1 {
				kind := [...]string{"unkeyed POST", "keyed POST", "GET", "GET"}[i%4]
				method, rt := "POST", http.RoundTripper(keyed)
				switch kind {
				case "GET":
					method = "GET"
				case "unkeyed POST":
					rt = unkeyedRT
				}
				id := fmt.Sprintf("%s-%d", mode, i)
				ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
				payload := ""
				if method != "GET" {
					payload = "amount=" + id
				}
				r, err := send(ctx, rt, method, url, payload, http.Header{"X-Request-Id": {id}})
				cancel()
				if err != nil {
					t.Error(err)
				}
				key := fmt.Sprintf("%s %d", kind, r.status)
				mu.Lock()
				var re *httpretry.RetryError
				switch {
				case errors.As(r.err, &re):
					key = kind + " error"
					errs[fmt.Sprintf("%v (%v)", re.Err, re.Stop)]++
				case r.err != nil:
					// The response was the caller's; its body was cut
					// after: past the point where any retry can help.
					key += " (body cut)"
				}
				outcomes[key]++
				switch {
				case kind != "unkeyed POST":
				case r.status == 200:
					unkeyedOK = append(unkeyedOK, id)
				case r.err != nil:
					unkeyedFailed = append(unkeyedFailed, id)
				}
				mu.Unlock()
				finished.Add(1)
			}
		})
	}
	// Stop the server at a quarter, a half and three quarters of the run.
	disruptions := 0
	wg.Go(func() {
		for _, at := range []int64{total / 4, total / 2, 3 * total / 4} {
			for finished.Load() < at {
				select {
				case <-stopped:
					return
				case <-time.After(time.Millisecond):
				}
			}
			disruptions++
			if mode == "graceful" {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				err := up.handOver(ctx)
				cancel()
				if err != nil {
					t.Errorf("graceful restart: %v", err)
					return
				}
				continue
			}
			up.kill()
			time.Sleep(50 * time.Millisecond)
			if err := up.start(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	start := time.Now()
	for finished.Load() < total && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stopped)
	wg.Wait()
	elapsed := time.Since(start)

	if n := finished.Load(); n != total {
		t.Fatalf("%d of %d requests finished in time", n, total)
	}
	sum := 0
	for _, n := range outcomes {
		sum += n
	}
	if sum != total {
		t.Errorf("%d outcomes for %d requests", sum, total)
	}
	if outcomes["GET 200"]+outcomes["GET 200 (body cut)"] != total/2 ||
		outcomes["keyed POST 200"]+outcomes["keyed POST 200 (body cut)"] != total/4 {
		t.Errorf("outcomes %v: want every GET and keyed POST answered 200", outcomes)
	}
	s := l.stats()
	if s.maxKey > 1 || s.maxID > 1 || s.misuse > 0 {
		t.Errorf("a payment applied twice: %+v", s)
	}
	for _, id := range unkeyedOK {
		if n := l.appliedID(id); n != 1 {
			t.Errorf("unkeyed POST %s answered 200 but applied %d times", id, n)
		}
	}
	appliedFailed := 0 // failed unkeyed POSTs the server had applied: why they were not retried
	for _, id := range unkeyedFailed {
		appliedFailed += l.appliedID(id)
	}
	if mode == "graceful" && outcomes["unkeyed POST error"] > 0 {
		t.Errorf("graceful shutdown lost %d unkeyed POSTs: %v", outcomes["unkeyed POST error"], outcomes)
	}
	recs := rec.all()
	classes := map[string]int{}
	for _, r := range recs {
		if r.retry {
			classes[r.class.String()]++
		}
	}
	figure(t, "HTTP/2 over TLS", "server %s 3 times under load (%d requests, %d clients, %v): outcomes %v; errors %v; of the unkeyed POSTs that failed, %d had been applied by the server; httpretry: %d attempts, retries by class %v; net/http's own hidden retries: %d; most applications of one payment: %d",
		map[string]string{"graceful": "restarted gracefully (GOAWAY)", "crash": "closed abruptly"}[mode],
		total, workers, elapsed.Round(time.Millisecond), formatCounts(outcomes), formatCounts(errs), appliedFailed, len(recs), formatCounts(classes),
		hidden.n.Load(), max(s.maxKey, s.maxID))
}
