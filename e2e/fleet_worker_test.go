package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/redis/rueidis"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/fleet"
)

// The fleet scenarios run each process of a fleet as a real OS process: the
// test binary itself, run again with -test.run=^TestFleetWorker$ and its
// configuration, as JSON, in the environment variable workerEnv. The worker
// sends its calls, each with an X-Worker header, and prints what it saw as
// one line on stdout, after workerMarker.
const (
	workerEnv    = "HTTPRETRY_FLEET_WORKER"
	workerMarker = "FLEETWORKER "
)

// The clients a worker can use.
const (
	modeFleet         = "fleet"         // httpretry, pacing by the account's quota, shared through fleet on Redis
	modeLocal         = "local"         // the same Transport and policy, without Fleet
	modeDefaults      = "defaults"      // httpretry's zero Policy
	modeRetryablehttp = "retryablehttp" // go-retryablehttp's NewClient
	modeFailsafe      = "failsafe"      // failsafehttp's NewRetryPolicyBuilder, its defaults
)

// fleetQuota is the account's quota that the fleet and local modes declare,
// as the upstream enforces it.
var fleetQuota = httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10, Key: "acct"}

// workerConfig is what one worker process is told to do.
type workerConfig struct {
	Name      string `json:"name"`
	Mode      string `json:"mode"`
	URL       string `json:"url"`
	Redis     string `json:"redis,omitempty"` // host:port, for modeFleet
	Namespace string `json:"ns,omitempty"`

	// Rate calls a second, for Duration from StartAt (Unix ns), each
	// bounded by CallTimeout; or, with Calls set, that many calls one after
	// the other, from at once.
	Rate        float64       `json:"rate,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"`
	StartAt     int64         `json:"start_at,omitempty"`
	Calls       int           `json:"calls,omitempty"`
	CallTimeout time.Duration `json:"call_timeout,omitempty"`

	// Breaker replaces the quota by a breaker (ConsecutiveFailures 5,
	// OpenFor a minute) and cuts the backoff to 10 ms, in every
	// httpretry mode: the shared-breaker scenario.
	Breaker bool `json:"breaker,omitempty"`

	// FleetTimeout is fleet.Options.Timeout (0: its default).
	FleetTimeout time.Duration `json:"fleet_timeout,omitempty"`
}

// The outcomes of a call.
const (
	outOK          = "200"
	out429         = "429"
	outStatus      = "status"       // another status
	outRateLimited = "rate-limited" // httpretry.ErrRateLimited: not sent
	outOpen        = "open"         // httpretry.ErrCircuitOpen: not sent
	outDeadline    = "deadline"     // the call's timeout passed (waiting for a Retry-After, mostly)
	outCancelled   = "cancelled"    // still in flight at drain after the run's end
	outErr         = "error"        // any other error
)

// drain is how long a worker lets its calls in flight finish after the
// run's end before it cancels them.
const drain = 500 * time.Millisecond

// callRec is one call: when it started, since StartAt, how long it took,
// and how it ended.
type callRec struct {
	At  time.Duration `json:"at"`
	Dur time.Duration `json:"d"`
	Out string        `json:"o"`
}

// fleetCall is a call of a Fleet method that took more than a millisecond.
type fleetCall struct {
	At     time.Duration `json:"at"`
	Dur    time.Duration `json:"d"`
	Method string        `json:"m"`
}

// upChange is a change of fleet.Stats.Up, seen at At since StartAt.
type upChange struct {
	At time.Duration `json:"at"`
	Up bool          `json:"up"`
}

// workerResult is what a worker prints.
type workerResult struct {
	Name, Mode string
	Late       time.Duration // how late the worker was at StartAt
	Skipped    int           // ticks without a call: too many in flight
	Calls      []callRec
	Errors     []string // the first few errors, outErr only

	Stats        fleet.Stats   // modeFleet only, at the end
	StatsAtStart fleet.Stats   // and when the calls began
	FleetCalls   int64         // calls of the Fleet's methods
	FleetMax     time.Duration // the longest of them
	FleetSlow    []fleetCall   // those over a millisecond (the first 1,000)
	Ups          []upChange    // changes of Stats.Up, sampled every 5 ms
	FleetClosed  bool
}

// count returns how many calls ended with out ("": all) and started in
// [from, to) since StartAt (to 0: whenever).
func (r *workerResult) count(out string, from, to time.Duration) int {
	n := 0
	for _, c := range r.Calls {
		if (out == "" || c.Out == out) && c.At >= from && (to == 0 || c.At < to) {
			n++
		}
	}
	return n
}

// TestFleetWorker is one process of a fleet scenario (see workerEnv). It
// does nothing unless workerEnv is set: the scenarios run it.
func TestFleetWorker(t *testing.T) {
	raw := os.Getenv(workerEnv)
	if raw == "" {
		return
	}
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("%s: %v", workerEnv, err)
	}
	res := runWorker(t, cfg)
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "\n%s%s\n", workerMarker, out)
}

// timedFleet times every call of a Fleet's methods: what a call waits for
// the fleet, Redis included.
type timedFleet struct {
	f     httpretry.Fleet
	start time.Time

	mu    sync.Mutex
	calls int64
	max   time.Duration
	slow  []fleetCall
}

func (tf *timedFleet) note(method string, began time.Time) {
	d := time.Since(began)
	tf.mu.Lock()
	defer tf.mu.Unlock()
	tf.calls++
	tf.max = max(tf.max, d)
	if d > time.Millisecond && len(tf.slow) < 1000 {
		tf.slow = append(tf.slow, fleetCall{began.Sub(tf.start), d, method})
	}
}

func (tf *timedFleet) Held(key string, now time.Time) (cooling, open time.Time) {
	defer tf.note("Held", time.Now())
	return tf.f.Held(key, now)
}

func (tf *timedFleet) Hold(key string, until time.Time, open bool) {
	defer tf.note("Hold", time.Now())
	tf.f.Hold(key, until, open)
}

func (tf *timedFleet) Record(key string, failed bool) int {
	defer tf.note("Record", time.Now())
	return tf.f.Record(key, failed)
}

func (tf *timedFleet) Take(key string, q httpretry.Quota, now time.Time, within time.Duration) (time.Duration, bool) {
	defer tf.note("Take", time.Now())
	return tf.f.Take(key, q, now, within)
}

// workerPolicy is the policy of the httpretry modes but defaults.
func workerPolicy(cfg workerConfig) httpretry.Policy {
	if cfg.Breaker {
		return httpretry.Policy{Backoff: backoff.Constant(10 * time.Millisecond),
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5, OpenFor: time.Minute}}
	}
	return httpretry.Policy{Overload: httpretry.OverloadPolicy{Pace: true, Quota: fleetQuota}}
}

func runWorker(t *testing.T, cfg workerConfig) *workerResult {
	start := time.Unix(0, cfg.StartAt)
	if cfg.StartAt == 0 {
		start = time.Now()
	}
	res := &workerResult{Name: cfg.Name, Mode: cfg.Mode}
	base := freshBase(t)
	var client *http.Client
	var f *fleet.Fleet
	var tf *timedFleet
	switch cfg.Mode {
	case modeFleet:
		rc, err := rueidis.NewClient(fleet.ClientOption(cfg.Redis))
		if err != nil {
			t.Fatalf("rueidis: %v", err)
		}
		defer rc.Close()
		f, err = fleet.New(rc, fleet.Options{Namespace: cfg.Namespace, Timeout: cfg.FleetTimeout})
		if err != nil {
			t.Fatalf("fleet.New: %v", err)
		}
		tf = &timedFleet{f: f, start: start}
		client = &http.Client{Transport: &httpretry.Transport{Base: base, Policy: workerPolicy(cfg), Fleet: tf}}
	case modeLocal:
		client = &http.Client{Transport: &httpretry.Transport{Base: base, Policy: workerPolicy(cfg)}}
	case modeDefaults:
		p := httpretry.Policy{}
		if cfg.Breaker {
			p.Backoff = backoff.Constant(10 * time.Millisecond)
		}
		client = &http.Client{Transport: &httpretry.Transport{Base: base, Policy: p}}
	case modeRetryablehttp:
		rc := retryablehttp.NewClient() // RetryMax 4, waits 1 s to 30 s, Retry-After obeyed
		rc.Logger = nil
		rc.HTTPClient.Transport = base
		client = rc.StandardClient()
	case modeFailsafe:
		client = &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())}
	default:
		t.Fatalf("unknown mode %q", cfg.Mode)
	}

	// Stats.Up, sampled.
	stopUps := make(chan struct{})
	upsDone := make(chan struct{})
	if f != nil {
		go func() {
			defer close(upsDone)
			last := false
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				if up := f.Stats().Up; up != last || len(res.Ups) == 0 {
					res.Ups = append(res.Ups, upChange{time.Since(start), up})
					last = up
				}
				select {
				case <-tick.C:
				case <-stopUps:
					return
				}
			}
		}()
	} else {
		close(upsDone)
	}

	timeout := cfg.CallTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	if cfg.Calls == 0 {
		t := time.AfterFunc(time.Until(start.Add(cfg.Duration+drain)), stopRun)
		defer t.Stop()
	}
	var mu sync.Mutex
	call := func() {
		ctx, cancel := context.WithTimeout(runCtx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
		if err != nil {
			panic(err)
		}
		req.Header.Set("X-Worker", cfg.Name)
		began := time.Now()
		resp, err := client.Do(req)
		var out string
		switch {
		case err == nil:
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				out = outOK
			case 429:
				out = out429
			default:
				out = outStatus
			}
		case errors.Is(err, httpretry.ErrRateLimited):
			out = outRateLimited
		case errors.Is(err, httpretry.ErrCircuitOpen):
			out = outOpen
		case strings.Contains(err.Error(), "giving up after") && strings.Contains(err.Error(), "429"):
			out = out429 // retryablehttp hands no response back after its last 429
		case errors.Is(err, context.Canceled):
			out = outCancelled
		case errors.Is(err, context.DeadlineExceeded):
			out = outDeadline
		default:
			out = outErr
		}
		mu.Lock()
		res.Calls = append(res.Calls, callRec{began.Sub(start), time.Since(began), out})
		if out == outErr && len(res.Errors) < 10 {
			res.Errors = append(res.Errors, err.Error())
		}
		mu.Unlock()
	}

	if late := time.Since(start); late > 0 {
		res.Late = late
	} else {
		time.Sleep(-late) // the fleet starts together
	}
	if f != nil {
		res.StatsAtStart = f.Stats()
	}
	if cfg.Calls > 0 {
		for range cfg.Calls {
			call()
		}
	} else {
		const maxInFlight = 1000
		sem := make(chan struct{}, maxInFlight)
		var wg sync.WaitGroup
		interval := time.Duration(float64(time.Second) / cfg.Rate)
		for at := time.Duration(0); at < cfg.Duration; at += interval {
			if d := time.Until(start.Add(at)); d > 0 {
				time.Sleep(d) // the open-loop schedule of the calls
			}
			select {
			case sem <- struct{}{}:
			default:
				res.Skipped++
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				call()
			})
		}
		wg.Wait()
	}
	close(stopUps)
	<-upsDone
	if f != nil {
		res.Stats = f.Stats()
		tf.mu.Lock()
		res.FleetCalls, res.FleetMax, res.FleetSlow = tf.calls, tf.max, tf.slow
		tf.mu.Unlock()
		f.Close()
		res.FleetClosed = true
	}
	slices.SortFunc(res.Calls, func(a, b callRec) int { return int(a.At - b.At) })
	client.CloseIdleConnections()
	base.CloseIdleConnections()
	return res
}

// runWorkers starts one worker process for each of cfgs, at once, and
// returns what each printed, in the order of cfgs.
func runWorkers(t *testing.T, cfgs ...workerConfig) []*workerResult {
	t.Helper()
	res, err := runWorkersErr(t, cfgs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runWorkersErr is runWorkers for any goroutine: it returns what failed.
func runWorkersErr(t *testing.T, cfgs ...workerConfig) ([]*workerResult, error) {
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		// A worker runs one test: it must not write the suite's report.
		return strings.HasPrefix(kv, "E2E_REPORT=") || strings.HasPrefix(kv, workerEnv+"=")
	})
	procs := make([]*proc, len(cfgs))
	for i, cfg := range cfgs {
		raw, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		p := &proc{}
		limit := cfg.Duration + time.Duration(max(cfg.Calls, 1))*time.Minute + time.Minute
		p.cmd = exec.Command(os.Args[0], "-test.run=^TestFleetWorker$", "-test.count=1", "-test.timeout="+limit.String())
		// The race detector sleeps a second at exit (atexit_sleep_ms):
		// a short-lived worker would take a second more each.
		p.cmd.Env = append(slices.Clip(env), workerEnv+"="+string(raw),
			"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		if err := p.cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting worker %s: %v", cfg.Name, err)
		}
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		})
		procs[i] = p
	}
	out := make([]*workerResult, len(cfgs))
	for i, p := range procs {
		err := p.cmd.Wait()
		var res *workerResult
		for line := range strings.Lines(p.stdout.String()) {
			if rest, ok := strings.CutPrefix(line, workerMarker); ok {
				res = &workerResult{}
				if jerr := json.Unmarshal([]byte(rest), res); jerr != nil {
					return nil, fmt.Errorf("worker %s: %v", cfgs[i].Name, jerr)
				}
			}
		}
		if err != nil || res == nil {
			return nil, fmt.Errorf("worker %s (%s): %v\nstdout:\n%s\nstderr:\n%s", cfgs[i].Name, cfgs[i].Mode, err,
				tail(p.stdout.String(), 4000), tail(p.stderr.String(), 4000))
		}
		if os.Getenv("FLEET_DEBUG") != "" {
			t.Logf("DEBUG worker %s (%s) stderr:\n%s", cfgs[i].Name, cfgs[i].Mode, tail(p.stderr.String(), 4000))
		}
		out[i] = res
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
