package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/seedhq/httpretry/fleet/fleettest"
)

// The fleet scenarios: worker processes (TestFleetWorker) that share an
// account's quota, its cool-downs and a host's breaker through module
// fleet on a real redis-server (fleettest), against a loopback API that
// enforces the quota (quotaAPI). Each runs a few seconds; with
// HTTPRETRY_FLEET=full each runs the length of the issue (a minute of
// shared quota, a 10 s cool-down, 50 short-lived processes).

// fleetTimeout is the workers' fleet.Options.Timeout. Its default, 10 ms,
// many round trips on loopback, is too short for this suite: with the
// race detector on two cores, 8 processes at once, and toxiproxy (in this
// test process) in front of Redis, a lease took 6 to 19 ms, and at 20 ms
// three commands in a row missed it now and then: the fleet fell back
// 1 to 19 times in 5 s, and the quota run got 3 to 47 % 429s (CI run 33;
// at 100 ms: 0 fallbacks, 0 429s). These tests measure what is shared;
// what a Redis that is slow or gone costs a call, TestFleetRedisFaults
// measures (and fleet's stall tests), with a Timeout of their own.
// HTTPRETRY_FLEET_TIMEOUT (a time.Duration) sets another, to see what a
// shorter one costs.
func fleetTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("HTTPRETRY_FLEET_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 100 * time.Millisecond
}

const fleetSection = "Fleet: processes sharing state through Redis"

// fleetFull reports whether the scenarios run at full length.
func fleetFull() bool { return os.Getenv("HTTPRETRY_FLEET") == "full" }

// pick returns short, or full under HTTPRETRY_FLEET=full.
func pick[T any](short, full T) T {
	if fleetFull() {
		return full
	}
	return short
}

// fleetCmd is the command that reproduces the figures of test.
func fleetCmd(test string) string {
	env := ""
	if fleetFull() {
		env = "HTTPRETRY_FLEET=full "
	}
	return fmt.Sprintf("`cd e2e && %sgo test -race -run '^%s$' -count=1 -v .`", env, test)
}

// fleetOf returns n workers named w0, w1, ... of mode at rate a second
// for d from start.
func fleetOf(mode string, n int, url, redis, ns string, rate float64, d time.Duration, start time.Time) []workerConfig {
	cfgs := make([]workerConfig, n)
	for i := range cfgs {
		cfgs[i] = workerConfig{Name: fmt.Sprintf("w%d", i), Mode: mode, URL: url, Redis: redis, Namespace: ns,
			Rate: rate, Duration: d, StartAt: start.UnixNano(), FleetTimeout: fleetTimeout()}
	}
	return cfgs
}

// startLead is how far ahead of now procs worker processes are told to
// start, so that they all have started by then. A process built with the
// race detector takes about 100 ms of a core to start; with 25 ms each,
// 8 of them on two cores started up to 500 ms late, and the first second
// of the run measured their start-up, not the fleet: its commands missed
// the Timeout and the fleet fell back.
func startLead(procs int) time.Time {
	return time.Now().Add(time.Second + time.Duration(procs)*100*time.Millisecond)
}

// slot is one fleet of workers against a quotaAPI of its own.
type slot struct {
	mode  string
	up    *quotaAPI
	start time.Time
	res   []*workerResult
}

// runSlots runs the fleets of modes at once, each of n workers at rate
// for d, each against its own quotaAPI (100/s, burst 10); prepare may set
// up each quotaAPI before the workers start.
func runSlots(t *testing.T, redis, ns string, modes []string, n int, rate float64, d time.Duration,
	prepare func(mode string, u *quotaAPI, start time.Time)) []*slot {
	t.Helper()
	start := startLead(n * len(modes))
	var cfgs []workerConfig
	slots := make([]*slot, len(modes))
	for i, mode := range modes {
		u := startQuotaAPI(t, float64(fleetQuota.Limit), fleetQuota.Burst)
		if prepare != nil {
			prepare(mode, u, start)
		}
		slots[i] = &slot{mode: mode, up: u, start: start}
		cfgs = append(cfgs, fleetOf(mode, n, u.URL, redis, ns+"-"+mode, rate, d, start)...)
	}
	res := runWorkers(t, cfgs...)
	for i, s := range slots {
		s.res = res[i*n : (i+1)*n]
		for _, r := range s.res {
			if r.Late > 0 {
				t.Logf("%s worker %s started %v late", s.mode, r.Name, r.Late.Round(time.Millisecond))
			}
		}
	}
	return slots
}

// at returns the offset since s's quotaAPI started of off since its
// workers' start.
func (s *slot) at(off time.Duration) time.Duration { return s.up.offset(s.start) + off }

// calls sums the calls of s's workers that ended with out ("": all).
func (s *slot) calls(out string) int {
	n := 0
	for _, r := range s.res {
		n += r.count(out, 0, 0)
	}
	return n
}

// commands sums the Redis commands of s's workers, and the times they
// fell back to local state, while the calls ran (fleet.New's are left out).
func (s *slot) commands() (cmds, downs int64) {
	for _, r := range s.res {
		cmds += r.Stats.Commands - r.StatsAtStart.Commands
		downs += r.Stats.Downs - r.StatsAtStart.Downs
	}
	return cmds, downs
}

// outcomes describes the calls of s's workers.
func (s *slot) outcomes() string {
	var parts []string
	for _, o := range []string{outOK, out429, outRateLimited, outOpen, outDeadline, outCancelled, outStatus, outErr} {
		if n := s.calls(o); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	return strings.Join(parts, ", ")
}

// failed counts the calls of s's workers that failed: an error (a
// refusal by a local control, which sent nothing, and a call still in
// flight at the end of the run, aside) or a status other than 200 and
// 429.
func (s *slot) failed() int {
	return s.calls(outErr) + s.calls(outStatus) + s.calls(outDeadline)
}

// errors returns the first errors s's workers saw.
func (s *slot) errors() []string {
	var out []string
	for _, r := range s.res {
		out = append(out, r.Errors...)
	}
	return out
}

// modeName describes a mode for the report.
var modeName = map[string]string{
	modeFleet:         "httpretry + fleet (Pace, Quota 100/s burst 10 shared on Redis)",
	modeLocal:         "httpretry, the same policy without Fleet",
	modeDefaults:      "httpretry defaults",
	modeRetryablehttp: "go-retryablehttp v0.7.8 NewClient",
	modeFailsafe:      "failsafe-go v0.9.8 failsafehttp.NewRetryPolicyBuilder().Build()",
}

var alternatives = []string{modeLocal, modeDefaults, modeRetryablehttp, modeFailsafe}

// runModes runs the fleet alone, then the alternatives together, each
// against its own API. Run at once, on two cores, the fleet's processes
// starve: its commands miss their Timeout, it falls back to local state
// again and again (28 times in 5 s), and 85 % of its requests are 429s.
func runModes(t *testing.T, redis, ns string, n int, rate float64, d time.Duration,
	prepare func(mode string, u *quotaAPI, start time.Time)) []*slot {
	t.Helper()
	return append(runSlots(t, redis, ns, []string{modeFleet}, n, rate, d, prepare),
		runSlots(t, redis, ns, alternatives, n, rate, d, prepare)...)
}

// percentile returns the q-quantile of ds (sorted in place).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// durations returns how long the calls of rs that started in [from, to)
// took.
func durations(rs []*workerResult, from, to time.Duration) []time.Duration {
	var ds []time.Duration
	for _, r := range rs {
		for _, c := range r.Calls {
			if c.At >= from && c.At < to {
				ds = append(ds, c.Dur)
			}
		}
	}
	return ds
}

// 1. Eight processes each wanting 50 calls a second against an account
// quota of 100 a second (burst 10): with the fleet they share it, with
// next to no 429 and the quota delivered.
func TestFleetSharedQuota(t *testing.T) {
	red := fleettest.Start(t)
	d := pick(5*time.Second, 60*time.Second)
	const workers, rate = 8, 50.0
	// The short form (CI's) asserts more loosely: on two cores with the
	// race detector, a process's command is late now and then and a
	// process paces alone for a moment. A stray 429 that follows no longer
	// holds the fleet for its Retry-After second (TestFleetStray429-
	// DoesNotHoldTheFleet; before, CI run 35 got 2.9 % 429s and 25.8/s of
	// the 100/s).
	maxShare, minGoodput := pick(0.10, 0.01), pick(0.80, 0.95)
	slots := runModes(t, red.Addr, "quota", workers, rate, d, nil)
	for _, s := range slots {
		all := s.up.seen(s.at(0), 0, nil)
		ok := count(s.up.seen(s.at(0), s.at(d), nil), 200)
		n429 := count(all, 429)
		goodput := float64(ok) / d.Seconds()
		share := 0.0
		if len(all) > 0 {
			share = float64(n429) / float64(len(all))
		}
		cmds, downs := s.commands()
		// how the quota was shared: the least and most any process got
		least, most := -1, 0
		for _, r := range s.res {
			n := count(s.up.seen(s.at(0), s.at(d), func(e event) bool { return e.worker == r.Name }), 200)
			if least < 0 || n < least {
				least = n
			}
			most = max(most, n)
		}
		extra := fmt.Sprintf("; 200s per process %d to %d", least, most)
		if s.mode == modeFleet {
			extra += fmt.Sprintf("; %d Redis commands (%.3f per call), %d fallbacks to local state", cmds, float64(cmds)/float64(max(1, s.calls(""))), downs)
		}
		figure(t, fleetSection, "shared quota, %s: %d processes × %.0f calls/s wanted for %v against 100/s (burst 10): %d requests reached the API, %d of them 429 (%.2f %%), goodput %.1f/s (%.1f %% of the quota); calls: %s%s (%s)",
			modeName[s.mode], workers, rate, d, len(all), n429, 100*share, goodput, goodput, s.outcomes(), extra, fleetCmd(t.Name()))
		if s.mode == modeFleet {
			if share > maxShare {
				t.Errorf("fleet: %d of %d requests were 429s (%.2f %%), want ≤ %.0f %%", n429, len(all), 100*share, 100*maxShare)
			}
			if goodput < minGoodput*100 {
				t.Errorf("fleet: goodput %.1f/s, want ≥ %.0f %% of the quota", goodput, 100*minGoodput)
			}
			if n := s.failed(); n > 0 {
				t.Errorf("fleet: %d calls failed: %q", n, s.errors())
			}
		}
	}
}

// 2 and 3. One process is told 429 Retry-After: N (the account cools
// down); with the fleet, no other process sends in the window, and when
// it ends the released calls are spread by the quota: no second
// cool-down.
func TestFleetSharedCoolDown(t *testing.T) {
	red := fleettest.Start(t)
	cool := pick(3*time.Second, 10*time.Second)
	pre, post := pick(500*time.Millisecond, 5*time.Second), pick(1500*time.Millisecond, 10*time.Second)
	d := pre + cool + post
	const workers, rate = 8, 50.0
	// grace is how long a cool-down takes to reach the other processes:
	// a request they sent before they heard of it may still arrive.
	const grace = 100 * time.Millisecond
	// The first request after pre, whoever sent it, starts the cool-down.
	prepare := func(mode string, u *quotaAPI, start time.Time) { u.coolOn("", start.Add(pre), cool) }
	slots := runModes(t, red.Addr, "cool", workers, rate, d, prepare)
	for _, s := range slots {
		at, told, ok := s.up.triggered()
		if !ok {
			t.Fatalf("%s: nothing arrived after %v", s.mode, pre)
		}
		others := func(e event) bool { return e.worker != told }
		early := s.up.seen(at, at+grace, others)
		inWindow := s.up.seen(at+grace, at+cool, others)
		after := s.up.seen(at+cool, at+cool+time.Second, nil)
		after429 := count(after, 429)
		var last time.Duration // the last of the others' requests in the window
		if len(inWindow) > 0 {
			last = inWindow[len(inWindow)-1].at - at
		}
		figure(t, fleetSection, "shared cool-down, %s: one of %d processes × %.0f calls/s told 429 Retry-After: %d; the 7 others sent %d requests in the window after its first %v (the last %v after it began), %d in that first %v; in the second after the window %d requests reached the API, %d of them 429 (%s)",
			modeName[s.mode], workers, rate, int(cool.Seconds()), len(inWindow), grace, last.Round(time.Millisecond), len(early), grace,
			len(after), after429, fleetCmd(t.Name()))
		if s.mode == modeFleet && os.Getenv("FLEET_DEBUG") != "" { // the arrivals around the window's end
			var offs []string
			for _, e := range s.up.seen(at+cool-200*time.Millisecond, at+cool+time.Second, nil) {
				offs = append(offs, fmt.Sprintf("%s@%v:%d", e.worker, (e.at-at-cool).Round(time.Millisecond), e.status))
			}
			t.Logf("DEBUG told %s at %v; around the window's end: %v", told, at-s.at(0), offs)
		}
		if s.mode == modeFleet {
			if len(inWindow) != 0 {
				t.Errorf("fleet: the other processes sent %d requests into the cool-down, the last %v after it began", len(inWindow), last)
			}
			if after429 > 5 {
				t.Errorf("fleet: %d 429s in the second after the cool-down, want ≤ 5: a second cool-down", after429)
			}
			// A call whose deadline the cool-down passed, or that waited for
			// it past the run's end, is the cool-down's doing.
			if n := s.calls(outErr) + s.calls(outStatus); n > 0 {
				t.Errorf("fleet: %d calls failed: %s %q", n, s.outcomes(), s.errors())
			}
		}
	}
}

// 4. Short-lived processes, one after the other, 3 calls each, to a dead
// host, with a breaker (ConsecutiveFailures 5): with the fleet, the
// failures of all count together and its breaker, once open, is open for
// every process that starts after.
func TestFleetSharedBreaker(t *testing.T) {
	red := fleettest.Start(t)
	procs := pick(20, 50)
	modes := []string{modeFleet, modeLocal, modeDefaults}
	reached := make([]int64, len(modes))
	refused := make([]int, len(modes))
	errs := make([]error, len(modes))
	var wg sync.WaitGroup
	for i, mode := range modes {
		dead := startDeadHost(t)
		wg.Go(func() {
			for p := range procs {
				cfg := workerConfig{Name: fmt.Sprintf("p%d", p), Mode: mode, URL: dead.URL(), Redis: red.Addr,
					Namespace: "breaker-" + mode, Calls: 3, Breaker: true}
				res, err := runWorkersErr(t, cfg)
				if err != nil {
					errs[i] = err
					return
				}
				refused[i] += res[0].count(outOpen, 0, 0)
				if n := res[0].count(outOK, 0, 0) + res[0].count(outStatus, 0, 0); n > 0 {
					errs[i] = fmt.Errorf("%s: %d calls to the dead host answered", mode, n)
					return
				}
			}
			reached[i] = dead.reached.Load()
		})
	}
	wg.Wait()
	for i, mode := range modes {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		desc := map[string]string{
			modeFleet:    "httpretry + fleet breaker (ConsecutiveFailures 5, OpenFor 1 min, backoff 10 ms)",
			modeLocal:    "httpretry, the same breaker in each process",
			modeDefaults: "httpretry defaults, no breaker (backoff cut to 10 ms)",
		}[mode]
		figure(t, fleetSection, "shared breaker, %s: %d processes started one after another, 3 calls each, to a host that resets every connection: %d requests reached it, %d of the %d calls refused by an open breaker (%s)",
			desc, procs, reached[i], refused[i], 3*procs, fleetCmd(t.Name()))
	}
	// The bound: the fleet counts the failures of all in Redis and opens
	// the breaker at the 5th; each later process reads it open at
	// fleet.New's first sync, before its first call. Calls never overlap
	// here, so exactly 5 reach the host; 20 leaves room for a slow sync.
	if reached[0] > 20 {
		t.Errorf("fleet: %d requests reached the dead host, want ≤ 20", reached[0])
	}
	if reached[1] < int64(procs) {
		t.Errorf("local breakers: %d requests reached the dead host, want at least one a process", reached[1])
	}
}

// 5. Redis slow, resetting, down, and restarted empty, under a running
// fleet: no call fails or waits beyond the Fleet's Timeout for it; the
// fleet falls back to each process's own pacing (the quota's overshoot is
// what that costs) and rejoins when Redis is back.
func TestFleetRedisFaults(t *testing.T) {
	red := fleettest.Start(t)
	x := startToxiproxy(t)
	p := x.proxy(t, red.Addr)
	u := pick(750*time.Millisecond, 5*time.Second)
	type phase struct {
		name     string
		from, to time.Duration // since the start
		on, off  func()
	}
	latency := toxic{name: "latency", typ: "latency", stream: "downstream", attrs: toxiclient.Attributes{"latency": 50}}
	reset := toxic{name: "reset", typ: "reset_peer", stream: "downstream", attrs: toxiclient.Attributes{"timeout": 0}}
	down := toxic{typ: "down"}
	apply := func(f toxic) func() {
		return func() {
			if err := f.apply(p); err != nil {
				t.Errorf("%v: %v", f, err)
			}
		}
	}
	clear := func(f toxic) func() {
		return func() {
			if err := f.clear(p); err != nil {
				t.Errorf("%v: %v", f, err)
			}
		}
	}
	phases := []phase{
		{"no fault", 0, 2 * u, nil, nil},
		{"latency 50 ms", 2 * u, 4 * u, apply(latency), clear(latency)},
		{"connections reset", 5 * u, 6 * u, apply(reset), clear(reset)},
		{"Redis unreachable (proxy down)", 7 * u, 9 * u, apply(down), clear(down)},
		{"Redis restarted empty", 10 * u, 12 * u, red.Restart, nil},
	}
	d := 12 * u
	// Its own Timeout, not fleetTimeout: the 50 ms of latency must miss it.
	const timeout = 20 * time.Millisecond
	const slack = 20 * time.Millisecond // the race detector, two cores, six processes

	// Fleet A wants more than the quota: while Redis is gone each of its
	// processes paces alone, and the API sees the sum. Fleet B wants less
	// than the quota: its calls never wait for a turn, so their latency is
	// what the fleet adds.
	start := startLead(6)
	upA := startQuotaAPI(t, float64(fleetQuota.Limit), fleetQuota.Burst)
	upB := startQuotaAPI(t, float64(fleetQuota.Limit), fleetQuota.Burst)
	cfgs := append(fleetOf(modeFleet, 4, upA.URL, p.Listen, "faults-a", 40, d, start),
		fleetOf(modeFleet, 2, upB.URL, p.Listen, "faults-b", 20, d, start)...)
	for i := range cfgs {
		cfgs[i].FleetTimeout = timeout
	}
	var res []*workerResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		res, err = runWorkersErr(t, cfgs...)
		if err != nil {
			t.Error(err)
		}
	}()
	// The faults, on the workers' schedule.
	ended := make([]time.Duration, len(phases)) // when each fault was over, since the start
	for i, ph := range phases {
		if ph.on == nil {
			continue
		}
		time.Sleep(time.Until(start.Add(ph.from)))
		ph.on()
		if ph.off == nil {
			ended[i] = time.Since(start) // Restart returns once the new server answers
			continue
		}
		time.Sleep(time.Until(start.Add(ph.to)))
		ph.off()
		ended[i] = time.Since(start)
	}
	<-done
	if res == nil {
		t.FailNow()
	}
	a, b := res[:4], res[4:]
	sa := &slot{mode: modeFleet, up: upA, start: start, res: a}
	sb := &slot{mode: modeFleet, up: upB, start: start, res: b}

	// No call failed, in either fleet; fleet B's were all answered 200.
	for _, s := range []*slot{sa, sb} {
		if n := s.failed(); n > 0 {
			t.Errorf("%d calls failed: %q", n, s.errors())
		}
	}
	if n := sb.calls(""); sb.calls(outOK) != n {
		t.Errorf("fleet B (under the quota): %s, want every call 200", sb.outcomes())
	}
	var fleetMax time.Duration
	var slowest fleetCall
	for _, r := range res {
		if r.FleetMax > fleetMax {
			fleetMax = r.FleetMax
		}
		for _, c := range r.FleetSlow {
			if c.Dur > slowest.Dur {
				slowest = c
			}
		}
	}
	figure(t, fleetSection, "Redis faults through toxiproxy, 6 processes, fleet.Options.Timeout %v: the longest any call of the Fleet's methods took was %v (%s at %v); calls: fleet A (4 × 40/s, over the quota) %s; fleet B (2 × 20/s, under it) %s (%s)",
		timeout, fleetMax.Round(10*time.Microsecond), slowest.Method, slowest.At.Round(time.Millisecond), sa.outcomes(), sb.outcomes(), fleetCmd(t.Name()))
	if fleetMax > timeout+slack {
		t.Errorf("a call of the Fleet's methods took %v (%s at %v since the start), want ≤ Timeout %v + %v",
			fleetMax, slowest.Method, slowest.At, timeout, slack)
	}

	baseB := durations(b, 0, phases[0].to)
	baseP99 := percentile(baseB, 0.99)
	for i, ph := range phases {
		// fleet A at the API: the overshoot of the quota
		arrivals := upA.seen(sa.at(ph.from), sa.at(ph.to), nil)
		perSec := float64(len(arrivals)) / (ph.to - ph.from).Seconds()
		ds := durations(b, ph.from, ph.to)
		p50, p99 := percentile(ds, 0.5), percentile(ds, 0.99)
		wentDown := 0
		for _, r := range res {
			if r.downIn(ph.from, ph.to) {
				wentDown++
			}
		}
		rejoin := "—"
		if ended[i] > 0 {
			var worst time.Duration
			for _, r := range res {
				until := d // Redis's restart, the last fault
				if i+1 < len(phases) {
					until = phases[i+1].from
				}
				t0, ok := r.upFrom(ended[i], until)
				if !ok {
					t.Errorf("%s: worker %s was not back up by the end of the run", ph.name, r.Name)
					continue
				}
				worst = max(worst, t0-ended[i])
			}
			rejoin = worst.Round(time.Millisecond).String()
		}
		figure(t, fleetSection, "Redis fault %q for %v: fleet A's requests reached the API at %.1f/s against the quota's 100/s (%+.0f %%), %d of them 429; %d of 6 processes fell back to local state; Stats.Up true again in all %s after the fault ended; fleet B's calls p50 %v, p99 %v (no-fault p99 %v: %+v) (%s)",
			ph.name, ph.to-ph.from, perSec, perSec-100, count(arrivals, 429), wentDown, rejoin,
			p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), baseP99.Round(10*time.Microsecond),
			(p99 - baseP99).Round(10*time.Microsecond), fleetCmd(t.Name()))
		if i > 0 && p99 > baseP99+timeout+slack {
			t.Errorf("%s: fleet B's p99 %v, no-fault %v: more than Timeout %v + %v added", ph.name, p99, baseP99, timeout, slack)
		}
	}
}

// downIn reports whether Stats.Up was false at some time in [from, to).
func (r *workerResult) downIn(from, to time.Duration) bool {
	for _, c := range r.Ups {
		if c.At >= to {
			break
		}
		if c.At >= from && !c.Up {
			return true
		}
	}
	return false
}

// upFrom returns the earliest time at or after from since which Stats.Up
// stayed true until to, and false if there is none.
func (r *workerResult) upFrom(from, to time.Duration) (time.Duration, bool) {
	since, up := time.Duration(-1), false
	for _, c := range r.Ups {
		if c.At >= to {
			break
		}
		switch {
		case c.Up && !up:
			since = c.At
		case !c.Up:
			since = -1
		}
		up = c.Up
	}
	if !up || since < 0 {
		return 0, false
	}
	return max(since, from), true
}

// 6. The cost of the fleet while nothing cools: Redis commands per call,
// and the latency it adds, against the same Transport without Fleet.
func TestFleetCost(t *testing.T) {
	red := fleettest.Start(t)
	d := pick(3*time.Second, 30*time.Second)
	const workers, rate = 2, 45.0 // 90/s: under the quota, so no call waits for a turn
	// Side by side, each against its own API: the machine's load is the
	// same for both.
	slots := runSlots(t, red.Addr, "cost", []string{modeFleet, modeLocal}, workers, rate, d, nil)
	fl, lo := slots[0], slots[1]
	for _, s := range []*slot{fl, lo} {
		if n := s.calls(""); s.calls(outOK) != n {
			t.Errorf("%s: %s, want every call 200", s.mode, s.outcomes())
		}
	}
	cmds, downs := fl.commands()
	calls := fl.calls("")
	perCall := float64(cmds) / float64(max(calls, 1))
	fd, ld := durations(fl.res, 0, d), durations(lo.res, 0, d)
	f50, f99, l50, l99 := percentile(fd, 0.5), percentile(fd, 0.99), percentile(ld, 0.5), percentile(ld, 0.99)
	var leases, setup int64
	for _, r := range fl.res {
		leases += r.Stats.Leases - r.StatsAtStart.Leases
		setup += r.StatsAtStart.Commands
	}
	arrivedF, arrivedL := fl.up.seen(fl.at(0), 0, nil), lo.up.seen(lo.at(0), 0, nil)
	figure(t, fleetSection, "cost, nothing cooling, %d processes × %.0f calls/s for %v (under the quota): requests that reached the API %d with the fleet (%d of them 429), %d without (%d 429); %d Redis commands for %d calls (%.3f per call; %d leases of the quota; fleet.New's %d before the calls left out), %d fallbacks to local state; call latency p50 %v / p99 %v with the fleet, %v / %v without (added: p50 %+v, p99 %+v) (%s)",
		workers, rate, d, len(arrivedF), count(arrivedF, 429), len(arrivedL), count(arrivedL, 429), cmds, calls, perCall, leases, setup, downs,
		f50.Round(time.Microsecond), f99.Round(time.Microsecond), l50.Round(time.Microsecond), l99.Round(time.Microsecond),
		(f50 - l50).Round(time.Microsecond), (f99 - l99).Round(time.Microsecond), fleetCmd(t.Name()))
	if perCall > 0.05 {
		t.Errorf("%.3f Redis commands per call, want ≤ 0.05", perCall)
	}
}
