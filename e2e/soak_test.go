package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

const (
	soakRequests    = 10_000
	soakConcurrency = 32
	soakRate        = 500               // requests started per second, at most
	soakTimeLimit   = 150 * time.Second // the load must end within this
)

// soakFaults are what the flapper switches between, every 150 to 400 ms.
var soakFaults = []toxic{
	{typ: "none"},
	{typ: "none"},
	{typ: "reset_peer", stream: "downstream", toxicity: 0.5, attrs: toxiclient.Attributes{"timeout": 0}},
	{typ: "reset_peer", stream: "upstream", toxicity: 0.5, attrs: toxiclient.Attributes{"timeout": 20}},
	{typ: "timeout", stream: "downstream", attrs: toxiclient.Attributes{"timeout": 0}},
	{typ: "latency", stream: "downstream", attrs: toxiclient.Attributes{"latency": 100, "jitter": 80}},
	{typ: "slow_close", stream: "downstream", attrs: toxiclient.Attributes{"delay": 200}},
	{typ: "limit_data", stream: "downstream", attrs: toxiclient.Attributes{"bytes": 300}},
	{typ: "limit_data", stream: "upstream", attrs: toxiclient.Attributes{"bytes": 150}},
	{typ: "down"},
}

// soakCounts is what OnAttempt and the callers saw.
type soakCounts struct {
	attempts, retries, budget, retriedRequests atomic.Int64
	inFlight, maxInFlight                      atomic.Int64
	mu                                         sync.Mutex
	classes                                    map[string]int // retried attempts by class
	outcomes                                   map[string]int // "GET 200", "unkeyed POST error (request not replayable)", …
	keyOf                                      map[string]string
	ok, failed                                 []string // ids answered 200, ids that ended in an error
}

// TestSoak sends 10,000 requests from 32 goroutines through toxiproxy to a
// payment-like upstream while the faults change every few hundred
// milliseconds, and checks: every request ends with exactly one outcome; no
// payment is applied twice; what was answered 200 was applied exactly once;
// goroutines and open files return to their baseline.
func TestSoak(t *testing.T) {
	if testing.Short() {
		skipf(t, "the soak does not run with -short")
	}
	base := currentUsage(t)
	var peak usage
	t.Run("load", func(t *testing.T) { peak = soak(t) })
	after := requireSettled(t, base)
	figure(t, "Soak under flapping faults", "goroutines (toxiproxy's apart): %d before, %d at the peak, %d after; toxiproxy's: %d at the peak, %d left after; open file descriptors (/proc/self/fd): %d before, %d at the peak, %d after",
		base.goroutines, peak.goroutines, after.goroutines, peak.injector, after.injector, base.fds, peak.fds, after.fds)
}

func soak(t *testing.T) (peak usage) {
	x := startToxiproxy(t)
	l := newLedger()
	up := httptest.NewServer(l)
	t.Cleanup(up.Close)
	p := x.proxy(t, up.Listener.Addr().String())
	url := "http://" + p.Listen + "/pay"

	c := &soakCounts{classes: map[string]int{}, outcomes: map[string]int{}, keyOf: map[string]string{}}
	// Two Transports over one connection pool and one retry budget (the
	// default token bucket): keys on, and keys off for the unkeyed POSTs.
	hidden := &hiddenRetries{base: freshBase(t)}
	budget := httpretry.DefaultBudget("")
	policy := httpretry.Policy{
		MaxAttempts:    6,
		Backoff:        backoff.Exponential{Base: 5 * time.Millisecond, Cap: 100 * time.Millisecond, Jitter: backoff.FullJitter},
		AttemptTimeout: 500 * time.Millisecond,
		NewBudget:      func(string) httpretry.Budget { return budget },
	}
	rts := soakTransports{
		keyed:   &httpretry.Transport{Base: hidden, Policy: policy, OnAttempt: c.observe},
		unkeyed: &httpretry.Transport{Base: hidden, Policy: unkeyed(policy), OnAttempt: c.observe},
	}

	var (
		next, finished atomic.Int64
		wg             sync.WaitGroup
		stop           = make(chan struct{})
		switches       = map[string]int{}
		deadline       = time.Now().Add(soakTimeLimit)
	)
	wg.Go(func() { peak = flap(t, p, stop, switches) })
	// Paced, so that the run spans many fault switches rather than
	// finishing inside a few.
	tick := time.NewTicker(time.Second / soakRate)
	defer tick.Stop()
	start := time.Now()
	var load sync.WaitGroup
	for range soakConcurrency {
		load.Go(func() {
			for i := next.Add(1) - 1; i < soakRequests && time.Now().Before(deadline); i = next.Add(1) - 1 {
				<-tick.C
				c.one(t, rts, url, int(i))
				finished.Add(1)
			}
		})
	}
	load.Wait()
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()

	if n := finished.Load(); n != soakRequests {
		t.Fatalf("%d of %d requests finished within %v", n, soakRequests, soakTimeLimit)
	}
	c.check(t, l)
	s := l.stats()
	figure(t, "Soak under flapping faults", "%d requests from %d goroutines (at most %d in flight at once) through toxiproxy in %v (%.0f requests/s, paced at %d/s at most), faults switched %d times: %s",
		soakRequests, soakConcurrency, c.maxInFlight.Load(), elapsed.Round(time.Millisecond), soakRequests/elapsed.Seconds(), soakRate, sum(switches), formatCounts(switches))
	figure(t, "Soak under flapping faults", "outcomes, one per request (%d in all, none lost): %s", sum(c.outcomes), formatCounts(c.outcomes))
	figure(t, "Soak under flapping faults", "succeeded (200): %d of %d; attempts %d; retries %d, in %d requests; refused by the retry budget (StopBudget): %d; retried attempts by class: %s; net/http's own hidden retries: %d",
		len(c.ok), soakRequests, c.attempts.Load(), c.retries.Load(), c.retriedRequests.Load(), c.budget.Load(), formatCounts(c.classes), hidden.n.Load())
	figure(t, "Soak under flapping faults", "ledger: %d keyed POSTs applied, once each (most applications of one key: %d; %d repeats answered from the stored result; key reused with another payload: %d); %d unkeyed POSTs applied (most for one request: %d); of the POSTs that ended in an error, %d had been applied (the caller cannot tell: an unkeyed one is not retried then, a keyed one can be retried safely later)",
		s.keys, s.maxKey, s.deliveries-s.keys, s.misuse, s.ids, s.maxID, c.appliedFailed(l))
	return peak
}

func (c *soakCounts) observe(a httpretry.Attempt) {
	c.attempts.Add(1)
	if a.N == 2 {
		c.retriedRequests.Add(1)
	}
	if a.Retry {
		c.retries.Add(1)
	}
	if a.Stop == httpretry.StopBudget {
		c.budget.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.Retry {
		c.classes[a.Class.String()]++
	}
	if id := a.Request.Header.Get("X-Request-Id"); a.N == 1 && soakKind(soakIndex(id)) == "keyed POST" {
		c.keyOf[id] = a.Request.Header.Get("Idempotency-Key")
	}
}

// soakTransports are the soak's clients: one adds idempotency keys to
// POSTs, the other does not.
type soakTransports struct{ keyed, unkeyed http.RoundTripper }

// soakKind is the kind of request i: half GETs, three in ten keyed POSTs,
// one in five unkeyed POSTs.
func soakKind(i int) string {
	return [...]string{"GET", "GET", "GET", "GET", "GET", "keyed POST", "keyed POST", "keyed POST", "unkeyed POST", "unkeyed POST"}[i%10]
}

func (c *soakCounts) one(t *testing.T, rts soakTransports, url string, i int) {
	kind := soakKind(i)
	method, rt, payload := "POST", rts.keyed, ""
	switch kind {
	case "GET":
		method = "GET"
	case "unkeyed POST":
		rt = rts.unkeyed
	}
	id := fmt.Sprintf("soak-%d", i)
	if method != "GET" {
		payload = "amount=" + id
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	storeMax(&c.maxInFlight, c.inFlight.Add(1))
	r, err := send(ctx, rt, method, url, payload, http.Header{"X-Request-Id": {id}})
	c.inFlight.Add(-1)
	if err != nil {
		t.Error(err) // a broken contract: both or neither, or the body left open
		return
	}
	outcome := fmt.Sprintf("%s %d", kind, r.status)
	var re *httpretry.RetryError
	switch {
	case r.err != nil && asRetryError(r.err, &re):
		outcome = fmt.Sprintf("%s error (%v)", kind, re.Stop)
	case r.err != nil:
		outcome += " (body cut)" // after RoundTrip returned: no retry can help
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[outcome]++
	if r.status == 200 && r.err == nil {
		c.ok = append(c.ok, id)
	} else if method != "GET" {
		c.failed = append(c.failed, id)
	}
}

// check compares what callers were told with what the ledger did.
func (c *soakCounts) check(t *testing.T, l *ledger) {
	s := l.stats()
	if s.maxKey > 1 || s.maxID > 1 || s.misuse > 0 {
		t.Errorf("a payment applied twice, or a key shared by two payments: %+v", s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keyOf) != soakRequests*3/10 {
		t.Errorf("%d keyed POSTs seen by OnAttempt, want %d", len(c.keyOf), soakRequests*3/10)
	}
	keys := map[string]bool{}
	for id, k := range c.keyOf {
		if k == "" || keys[k] {
			t.Errorf("request %s: key %q missing or shared", id, k)
		}
		keys[k] = true
	}
	for _, id := range c.ok {
		switch {
		case c.keyOf[id] != "" && l.appliedKey(c.keyOf[id]) != 1:
			t.Errorf("POST %s answered 200 but applied %d times", id, l.appliedKey(c.keyOf[id]))
		case soakKind(soakIndex(id)) == "unkeyed POST" && l.appliedID(id) != 1:
			t.Errorf("unkeyed POST %s answered 200 but applied %d times", id, l.appliedID(id))
		}
	}
}

// appliedFailed counts the payments that ended in an error for the caller
// but that the ledger applied.
func (c *soakCounts) appliedFailed(l *ledger) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, id := range c.failed {
		if k := c.keyOf[id]; k != "" {
			n += l.appliedKey(k)
		} else {
			n += l.appliedID(id)
		}
	}
	return n
}

func soakIndex(id string) int {
	var i int
	fmt.Sscanf(id, "soak-%d", &i)
	return i
}

// flap switches the proxy between soakFaults until stop is closed, and
// returns the most goroutines and open files it saw meanwhile.
func flap(t *testing.T, p *toxiclient.Proxy, stop <-chan struct{}, switches map[string]int) (peak usage) {
	current := toxic{typ: "none"}
	for {
		select {
		case <-stop:
			if current.typ != "none" {
				if err := current.clear(p); err != nil {
					t.Errorf("clearing %v: %v", current, err)
				}
			}
			return peak
		case <-time.After(time.Duration(150+rand.IntN(250)) * time.Millisecond):
		}
		u := currentUsage(t)
		peak = usage{max(peak.goroutines, u.goroutines), max(peak.injector, u.injector), max(peak.fds, u.fds)}
		if current.typ != "none" {
			if err := current.clear(p); err != nil {
				t.Errorf("clearing %v: %v", current, err)
				return peak
			}
		}
		current = soakFaults[rand.IntN(len(soakFaults))]
		current.name = "flap"
		switches[current.String()]++
		if current.typ != "none" {
			if err := current.apply(p); err != nil {
				t.Errorf("applying %v: %v", current, err)
				return peak
			}
		}
	}
}

// storeMax raises v to n if n is larger.
func storeMax(v *atomic.Int64, n int64) {
	for m := v.Load(); n > m; m = v.Load() {
		if v.CompareAndSwap(m, n) {
			return
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// formatCounts lists a tally, largest first.
func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	if len(keys) == 0 {
		return "none"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
