package fleet_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
	"github.com/seedhq/httpretry/statuspage"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// process is one process of a fleet: a Fleet on a client of its own.
func process(t *testing.T, srv *fleettest.Server, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	return processAt(t, srv.Addr, opts)
}

// processAt is a process of a fleet whose Redis is at addr.
func processAt(t *testing.T, addr string, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	c, err := rueidis.NewClient(fleet.ClientOption(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if opts.Namespace == "" {
		opts.Namespace = t.Name()
	}
	if opts.Timeout == 0 {
		// These tests are of what is shared, not of the bound, which
		// TestRedisDown checks: a machine under -race and load keeps a
		// command past the default 10 ms now and then.
		opts.Timeout = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f, err := fleet.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if !f.Stats().Up {
		t.Fatal("the fleet is not up after New")
	}
	return f
}

// eventually polls cond every millisecond for up to d: what another
// process published arrives through Redis, in real time.
func eventually(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRefusesNonsense(t *testing.T) {
	if _, err := fleet.New(nil, fleet.Options{}); err == nil {
		t.Error("New(nil) made a Fleet")
	}
	srv := fleettest.Start(t)
	c, err := rueidis.NewClient(fleet.ClientOption(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, o := range []fleet.Options{{Timeout: -1}, {LeaseFor: -time.Second}} {
		if _, err := fleet.New(c, o); err == nil {
			t.Errorf("New(%+v) made a Fleet", o)
		}
	}
}

// A cool-down one process holds reaches the others at once, and a process
// that starts later syncs it at New.
func TestCoolDownIsShared(t *testing.T) {
	srv := fleettest.Start(t)
	a, b := process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{Namespace: t.Name()})
	until := time.Now().Add(10 * time.Second)
	a.Hold("api.example.com:443", until, false)
	eventually(t, time.Second, func() bool {
		cooling, _ := b.Held("api.example.com:443", time.Now())
		return cooling.After(until.Add(-50 * time.Millisecond))
	}, "process b never heard of a's cool-down")
	if cooling, open := b.Held("other.example.com:443", time.Now()); !cooling.IsZero() || !open.IsZero() {
		t.Errorf("another host is held: %v %v", cooling, open)
	}
	late := process(t, srv, fleet.Options{Namespace: t.Name()})
	if cooling, _ := late.Held("api.example.com:443", time.Now()); cooling.Before(until.Add(-50 * time.Millisecond)) {
		t.Errorf("a process started later holds until %v, want about %v", cooling, until)
	}
	// A shorter cool-down does not shorten it.
	b.Hold("api.example.com:443", time.Now().Add(time.Second), false)
	time.Sleep(20 * time.Millisecond)
	if cooling, _ := a.Held("api.example.com:443", time.Now()); cooling.Before(until.Add(-50 * time.Millisecond)) {
		t.Errorf("a shorter cool-down shortened the fleet's: %v", cooling)
	}
	// A namespace of its own shares nothing with this one.
	other := process(t, srv, fleet.Options{Namespace: t.Name() + "-other"})
	if cooling, _ := other.Held("api.example.com:443", time.Now()); !cooling.IsZero() {
		t.Errorf("another namespace is held until %v", cooling)
	}
}

// Failures count across the fleet; an open breaker holds every process;
// once its time is over exactly one process takes the trial, whose
// success closes it in all.
func TestBreakerIsShared(t *testing.T) {
	srv := fleettest.Start(t)
	ps := []*fleet.Fleet{process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})}
	const key = "dead.example.com:443"
	n := 0
	for i := range 6 {
		n = ps[i%3].Record(key, true)
	}
	if n != 6 {
		t.Fatalf("six failures in three processes counted %d", n)
	}
	ps[0].Hold(key, time.Now().Add(300*time.Millisecond), true)
	for i, p := range ps {
		eventually(t, time.Second, func() bool { _, open := p.Held(key, time.Now()); return !open.IsZero() },
			"a process never heard of the open breaker")
		_ = i
	}
	time.Sleep(350 * time.Millisecond) // the breaker's time passes, in real time: Redis keeps it
	var trials []int
	for i, p := range ps {
		if _, open := p.Held(key, time.Now()); open.IsZero() {
			trials = append(trials, i)
		}
	}
	if len(trials) != 1 {
		t.Fatalf("processes %v took the trial, want exactly one", trials)
	}
	taker := ps[trials[0]]
	taker.Record(key, false)
	for _, p := range ps {
		eventually(t, time.Second, func() bool { _, open := p.Held(key, time.Now()); return open.IsZero() },
			"the trial's success did not close the breaker everywhere")
	}
	if n := ps[(trials[0]+1)%3].Record(key, true); n != 1 {
		t.Errorf("after the trial's success a failure counts %d, want 1", n)
	}
}

// A trial that fails opens the breaker again, in every process.
func TestFailedTrialOpensAgain(t *testing.T) {
	srv := fleettest.Start(t)
	a, b := process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})
	const key = "dead.example.com:443"
	a.Hold(key, time.Now().Add(300*time.Millisecond), true)
	eventually(t, time.Second, func() bool { _, open := b.Held(key, time.Now()); return !open.IsZero() }, "b never heard")
	time.Sleep(350 * time.Millisecond)
	_, openA := a.Held(key, time.Now())
	_, openB := b.Held(key, time.Now())
	taker, other := a, b
	if !openA.IsZero() {
		taker, other = b, a
	}
	if openA.IsZero() == openB.IsZero() {
		t.Fatalf("trial taken by both or neither: %v %v", openA, openB)
	}
	taker.Record(key, true)
	if _, open := taker.Held(key, time.Now()); !open.After(time.Now()) {
		t.Error("the taker of a failed trial is not held")
	}
	eventually(t, time.Second, func() bool {
		_, open := other.Held(key, time.Now())
		return open.After(time.Now().Add(50 * time.Millisecond))
	}, "the failed trial did not open the breaker again for the other process")
}

// callAt calls like a Transport whose calls come every gap for d: each
// takes a turn of q, at most within away, and waits for it; it returns
// when each turn came and how long each call waited.
func callAt(p *fleet.Fleet, q httpretry.Quota, gap, within, d time.Duration) (turns []time.Time, waits []time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(gap)
	defer tick.Stop()
	end := time.Now().Add(d)
	for now := range tick.C {
		if now.After(end) {
			break
		}
		wg.Go(func() {
			now := time.Now()
			wait, ok := p.Take("acct", q, now, within)
			if !ok || wait > within {
				return
			}
			time.Sleep(wait)
			mu.Lock()
			turns = append(turns, now.Add(wait))
			waits = append(waits, wait)
			mu.Unlock()
		})
	}
	wg.Wait()
	return turns, waits
}

// Two processes that want more than their quota together never exceed
// it, and share it about equally: every window of their turns holds at
// most the burst and the rate, with a little for the moment the second
// joins.
func TestQuotaIsShared(t *testing.T) {
	srv := fleettest.Start(t)
	// Both start at once, as the processes of a deployment do: the first
	// to report is told it is alone, and learns of the second from its
	// message (which it once took for the echo of its own report, and
	// sent at the whole rate for LeaseFor).
	ps := []*fleet.Fleet{process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})}
	q := httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10}
	var all []time.Time
	var each [2]int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			turns, _ := callAt(p, q, time.Second/80, time.Second, 2*time.Second) // 80/s each
			mu.Lock()
			all = append(all, turns...)
			each[i] = len(turns)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	span := all[len(all)-1].Sub(all[0])
	if most := int(100*span.Seconds()) + 10 + 6; len(all) < 180 || len(all) > most {
		t.Errorf("%d turns in %v of a 100/s quota (burst 10), want 180 to %d", len(all), span, most)
	}
	for i := range all {
		j := i
		for j < len(all) && all[j].Sub(all[i]) < 500*time.Millisecond {
			j++
		}
		// 500 ms at 100/s is 50 turns, with the burst of 10 and a few
		// while the second process joins.
		if j-i > 63 {
			t.Fatalf("%d turns within 500 ms from %v", j-i, all[i])
		}
	}
	if min(each[0], each[1])*10 < len(all)*4 {
		t.Errorf("the processes took %d and %d turns: the shares are not fair", each[0], each[1])
	}
}

// Processes that want less than their quota together are not held behind
// each other: their calls wait for no turn (the lease design before held
// them up to 250 ms).
func TestQuotaUnderDemandWaitsLittle(t *testing.T) {
	srv := fleettest.Start(t)
	ps := []*fleet.Fleet{process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})}
	q := httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10}
	var waits []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			_, w := callAt(p, q, time.Second/40, time.Second, 2*time.Second) // 40/s each: 80/s of 100/s
			mu.Lock()
			waits = append(waits, w...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(waits)
	if len(waits) < 140 {
		t.Fatalf("%d of about 160 calls had a turn", len(waits))
	}
	if p90 := waits[len(waits)*9/10]; p90 > 30*time.Millisecond {
		t.Errorf("under the quota, 90 %% of calls waited up to %v for a turn, want at most 30 ms", p90)
	}
}

// When Redis is down every method answers at once as a fleet that knows
// nothing, the transition is logged once, and the fleet is shared again
// once Redis is back, empty.
func TestRedisDown(t *testing.T) {
	srv := fleettest.Start(t)
	var log syncBuffer
	opts := fleet.Options{Timeout: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	a, b := process(t, srv, opts), process(t, srv, fleet.Options{Namespace: t.Name()})
	a.Hold("h:443", time.Now().Add(time.Minute), false)
	srv.Stop()
	q := httpretry.Quota{Limit: 10}
	for range 20 {
		start := time.Now()
		a.Hold("h:443", time.Now().Add(time.Minute), true)
		a.Record("h:443", true)
		a.Take("h:443", q, time.Now(), time.Second)
		a.Held("h:443", time.Now())
		if took := time.Since(start); took > 4*opts.Timeout+20*time.Millisecond {
			t.Fatalf("four calls took %v with Redis down, bound %v each", took, opts.Timeout)
		}
	}
	if a.Stats().Up {
		t.Fatal("Stats.Up with Redis down")
	}
	if cooling, open := a.Held("h:443", time.Now()); !cooling.IsZero() || !open.IsZero() {
		t.Errorf("a fleet that is down holds: %v %v", cooling, open)
	}
	if _, ok := a.Take("h:443", q, time.Now(), time.Second); ok {
		t.Error("Take with Redis down says it shares the quota")
	}
	if n := a.Record("h:443", true); n != 0 {
		t.Errorf("Record with Redis down counts %d", n)
	}
	// A cool-down this process was told while Redis was down reaches the
	// others once it is back.
	a.Hold("told-while-down:443", time.Now().Add(time.Minute), false)
	srv.Restart()
	eventually(t, 5*time.Second, func() bool { return a.Stats().Up && b.Stats().Up }, "the processes never shared state again")
	// A command in the first moments after the restart may still time
	// out as the client reconnects: a second fall-back, not logged again.
	if st := a.Stats(); st.Downs < 1 || st.Downs > 3 {
		t.Errorf("Downs = %d, want 1 (or a flap or two as the client reconnects)", st.Downs)
	}
	if n := strings.Count(log.String(), "unreachable"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "back") {
		t.Errorf("the return was not logged:\n%s", log.String())
	}
	eventually(t, 2*time.Second, func() bool { c, _ := b.Held("told-while-down:443", time.Now()); return !c.IsZero() },
		"a cool-down told while Redis was down never reached the other process")
	b.Hold("h2:443", time.Now().Add(time.Minute), false)
	eventually(t, time.Second, func() bool { c, _ := a.Held("h2:443", time.Now()); return !c.IsZero() }, "not shared after the restart")
}

// What Redis holds is validated, not trusted: an entry out of bounds or
// a message that is not the fleet's is refused and counted.
func TestRedisAnswersGarbage(t *testing.T) {
	srv := fleettest.Start(t)
	ns := t.Name()
	a := process(t, srv, fleet.Options{Namespace: ns})
	for _, m := range []string{"cool|notanumber|h:443", "cool|99999999999999|h:443", "open|-5|h:443", "nonsense", "cool|5|", "what|5|h:443"} {
		if r := srv.Do("PUBLISH " + ns + ":events " + m); r != ":1" {
			t.Fatalf("PUBLISH: %s", r)
		}
	}
	eventually(t, time.Second, func() bool { return a.Stats().Invalid >= 6 }, fmt.Sprintf("garbage messages not counted: %+v", a.Stats()))
	if cooling, open := a.Held("h:443", time.Now()); !cooling.IsZero() || !open.IsZero() {
		t.Errorf("garbage held a host: %v %v", cooling, open)
	}
	// A cool-down of a year in the set: a process that syncs refuses it.
	srv.Do("ZADD " + ns + ":cool 99999999999999999 h:443")
	c, err := rueidis.NewClient(fleet.ClientOption(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := fleet.New(c, fleet.Options{Namespace: ns, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if cooling, _ := b.Held("h:443", time.Now()); !cooling.IsZero() {
		t.Errorf("a year's cool-down read back from Redis holds until %v", cooling)
	}
	if st := b.Stats(); !st.Up || st.Invalid == 0 {
		t.Errorf("Stats after a sync with an entry out of bounds, which it skips: %+v", st)
	}
	// State that is not the fleet's own starts afresh: a quota's, a run
	// of failures.
	srv.Do("SET " + ns + ":quota:acct notanumber")
	if wait, ok := a.Take("acct", httpretry.Quota{Limit: 10}, time.Now(), time.Second); !ok || wait > 50*time.Millisecond {
		t.Errorf("a lease over a garbage quota state: %v %v, want a turn at once", wait, ok)
	}
	srv.Do("SET " + ns + ":fail:h:443 notanumber")
	if n := a.Record("h:443", true); n != 1 {
		t.Errorf("a failure over a garbage count counts %d, want 1", n)
	}
	if !a.Stats().Up {
		t.Error("the fleet fell back over state it could start afresh")
	}
}

// Through Transports: a 429 with Retry-After one process is told holds
// the other process's attempts to the host, with no request of its own.
func TestTransportsShareACoolDown(t *testing.T) {
	srv := fleettest.Start(t)
	var mu sync.Mutex
	sent := map[string]int{}
	base := func(name string, status int) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			sent[name]++
			mu.Unlock()
			h := http.Header{}
			if status == 429 {
				h.Set("Retry-After", "30")
			}
			return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
		})
	}
	p := httpretry.Policy{MaxAttempts: 1, Overload: httpretry.OverloadPolicy{Pace: true, PaceFailFast: true}}
	a := &httpretry.Transport{Base: base("a", 429), Policy: p, Fleet: process(t, srv, fleet.Options{})}
	fb := process(t, srv, fleet.Options{Namespace: t.Name()})
	b := &httpretry.Transport{Base: base("b", 200), Policy: p, Fleet: fb}
	req, _ := http.NewRequest("GET", "https://api.example.com/v1", nil)
	resp, err := a.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	eventually(t, time.Second, func() bool { c, _ := fb.Held("api.example.com:443", time.Now()); return !c.IsZero() }, "b never heard")
	_, err = b.RoundTrip(req.Clone(req.Context()))
	if !errors.Is(err, httpretry.ErrRateLimited) {
		t.Errorf("b's call in the fleet's cool-down: %v, want ErrRateLimited", err)
	}
	if sent["b"] != 0 {
		t.Errorf("b sent %d requests into the fleet's cool-down", sent["b"])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Sharing a quota costs a round trip a LeaseFor per process, not one a
// call: two processes wanting 160/s of a 100/s quota for 2 s report
// about eight times (the lease design before took 0.28 round trips a
// turn once the schedule was booked).
func TestQuotaCostsARoundTripALeaseFor(t *testing.T) {
	srv := fleettest.Start(t)
	ps := []*fleet.Fleet{process(t, srv, fleet.Options{}), process(t, srv, fleet.Options{})}
	q := httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10}
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for _, p := range ps {
		wg.Go(func() {
			turns, _ := callAt(p, q, time.Second/80, time.Second, 2*time.Second)
			mu.Lock()
			taken += len(turns)
			mu.Unlock()
		})
	}
	wg.Wait()
	leases := ps[0].Stats().Leases + ps[1].Stats().Leases
	if taken < 180 {
		t.Errorf("%d turns taken in 2 s of a 100/s quota", taken)
	}
	if per := float64(leases) / float64(taken); per > 0.1 {
		t.Errorf("%d reports for %d turns: %.2f a turn, want at most 0.1", leases, taken, per)
	}
}

// Close ends every goroutine the Fleet started, with Redis up or down.
func TestCloseLeavesNothingRunning(t *testing.T) {
	srv := fleettest.Start(t)
	for _, down := range []bool{false, true} {
		before := runtime.NumGoroutine()
		c, err := rueidis.NewClient(fleet.ClientOption(srv.Addr))
		if err != nil {
			t.Fatal(err)
		}
		f, err := fleet.New(c, fleet.Options{Namespace: t.Name(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		f.Hold("h:443", time.Now().Add(time.Minute), false)
		f.Take("h:443", httpretry.Quota{Limit: 10}, time.Now(), time.Second)
		if down {
			srv.Stop()
			f.Record("h:443", true) // finds Redis down: the probe starts
		}
		f.Close()
		c.Close()
		eventually(t, 2*time.Second, func() bool { return runtime.NumGoroutine() <= before },
			fmt.Sprintf("goroutines left after Close (Redis down: %v)", down))
		if down {
			srv.Restart()
		}
	}
}

// A Fleet is an expvar.Var whose String is its Stats as JSON, and the
// status page shows it above the hosts.
func TestFleetOnTheStatusPage(t *testing.T) {
	srv := fleettest.Start(t)
	f := process(t, srv, fleet.Options{})
	var v expvar.Var = f
	var st fleet.Stats
	if err := json.Unmarshal([]byte(v.String()), &st); err != nil || !st.Up || st.Commands == 0 {
		t.Fatalf("String %s: %+v, %v; want Stats, up, with commands", v.String(), st, err)
	}
	tr := &httpretry.Transport{Fleet: f}
	w := httptest.NewRecorder()
	statuspage.Handler(tr).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if page := w.Body.String(); w.Code != 200 || !strings.Contains(page, `Fleet: up <b class="up">true</b> · downs <b>0</b>`) {
		t.Errorf("status page %d does not show the fleet up:\n%s", w.Code, page)
	}
}
