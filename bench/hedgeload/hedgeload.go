// Package hedgeload measures hedging on real sockets: a loopback server
// with injected latency distributions (the scenarios of issue 14), eight
// clients, and each hedging client side by side: no hedging, httpretry's
// fixed and adaptive delays, and failsafe-go's delay-quantile and
// fixed-delay hedge policies. Each run reports request latency quantiles,
// extra requests (attempts the server saw per request, minus one) and new
// connections. cmd/hedgeload runs the variants in rounds, each in its own
// process, in an order turned every round.
package hedgeload

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/seedhq/httpretry"
)

// Concurrency is the number of clients sending requests at once.
const Concurrency = 8

// Scenario is a server latency model and how long a run lasts.
type Scenario struct {
	Name string
	// Requests ends a run after this many requests; with Phases, the run
	// lasts as long as they do instead.
	Requests int
	// Phases split a run by time; the model sees which phase it is in.
	Phases []Phase
	// Latency is the server's delay before it answers an attempt that
	// arrives in phase (one of Phases, or ""), when started requests of
	// Requests have been sent, drawn with rng.
	Latency func(rng *rand.Rand, started int64, total int, phase string) time.Duration
}

// Phase is a stretch of a timed run.
type Phase struct {
	Name string
	Len  time.Duration
}

// Scenarios returns the three scenarios, with their sizes
// multiplied by scale. At scale 1, T1 and T3 send 15,000 requests (T3
// shifts from 2 ms to 20 ms halfway), and T2 runs 10 s before the
// brownout, 10 s of it, then the 2 s "just after" it (where the issue asks
// the delay to be back to normal) and 8 s more.
func Scenarios(scale float64) []Scenario {
	n := max(int(15_000*scale), 100)
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * scale) }
	ms := time.Millisecond
	return []Scenario{
		{Name: "T1", Requests: n, Latency: func(rng *rand.Rand, _ int64, _ int, _ string) time.Duration {
			if rng.Float64() < 0.01 {
				return 200 * ms
			}
			return 2 * ms
		}},
		{Name: "T2", Phases: []Phase{{"before", d(10 * time.Second)}, {"brownout", d(10 * time.Second)}, {"just after", d(2 * time.Second)}, {"after", d(8 * time.Second)}},
			Latency: func(_ *rand.Rand, _ int64, _ int, phase string) time.Duration {
				if phase == "brownout" {
					return 200 * ms
				}
				return 2 * ms
			}},
		{Name: "T3", Requests: n, Latency: func(_ *rand.Rand, started int64, total int, _ string) time.Duration {
			if started > int64(total/2) {
				return 20 * ms
			}
			return 2 * ms
		}},
	}
}

// Variant is a client under test.
type Variant struct {
	Name string
	// New wraps base; nil marks a slot not filled yet.
	New func(base http.RoundTripper) http.RoundTripper
}

// FixedDelay is the fixed hedge delay of the fixed-delay variants: the
// value of the table that worked on T1.
const FixedDelay = 5 * time.Millisecond

// Variants are the clients compared, in their default order.
func Variants() []Variant {
	return []Variant{
		{"none", func(base http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: base} // the default policy: no hedging
		}},
		{"httpretry-fixed", func(base http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: FixedDelay}}}
		}},
		// The default policy with adaptive hedging on and nothing tuned.
		{"httpretry-adaptive", func(base http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: base, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Adaptive: true}}}
		}},
		{"failsafe-quantile", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 30, 20))
		}},
		{"failsafe-fixed", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, hedgepolicy.NewWithDelay[*http.Response](FixedDelay))
		}},
	}
}

// Stats summarises the requests of a run, or of one phase of it.
type Stats struct {
	Phase          string
	Requests       int
	Attempts       int64 // seen by the server
	Errors         int
	P50, P99, P999 time.Duration
	// Quantiles are the request latencies at CDFLevels.
	Quantiles []time.Duration `json:",omitempty"`
}

// Extra is the share of attempts beyond one per request.
func (s Stats) Extra() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Attempts)/float64(s.Requests) - 1
}

// Result is one run of one variant on one scenario.
type Result struct {
	Variant, Scenario string
	Scale             float64 // of the scenario (see Scenarios)
	Dials             int64   // new connections
	Total             Stats
	Phases            []Stats `json:",omitempty"`
	// Delays traces the hedge delay of a client that reports it (an
	// httpretry Transport, through Stats), every DelayEvery requests.
	Delays []DelayPoint `json:",omitempty"`
}

// DelayEvery is how many requests apart the hedge delay is traced.
const DelayEvery = 50

// DelayPoint is the hedge delay a client reported once Request requests
// had been started, At into the run.
type DelayPoint struct {
	Request int64
	At      time.Duration
	Delay   time.Duration
}

// DelayAt returns the last traced delay at or before at, and false when
// none was traced by then.
func (r Result) DelayAt(at time.Duration) (time.Duration, bool) {
	var d time.Duration
	ok := false
	for _, p := range r.Delays {
		if p.At > at {
			break
		}
		d, ok = p.Delay, true
	}
	return d, ok
}

// Settled returns the first traced request from which on the delay stays
// within tol (0.25: ±25 %) of want, and false if it never does.
func (r Result) Settled(want time.Duration, tol float64) (int64, bool) {
	settled, ok := int64(0), false
	for _, p := range r.Delays {
		if math.Abs(float64(p.Delay)/float64(want)-1) <= tol {
			if !ok {
				settled, ok = p.Request, true
			}
		} else {
			ok = false
		}
	}
	return settled, ok
}

// delayReporter is a client that can tell its hedge delay: an httpretry
// Transport, whose Stats report it per host.
type delayReporter interface {
	Stats() []httpretry.HostStats
}

// hedgeDelay returns the hedge delay rt reports for its one host.
func hedgeDelay(rt http.RoundTripper) (time.Duration, bool) {
	r, ok := rt.(delayReporter)
	if !ok {
		return 0, false
	}
	for _, h := range r.Stats() {
		if h.Hedging != nil && h.Hedging.Samples > 0 {
			return h.Hedging.Delay, true
		}
	}
	return 0, false
}

// Run sends the scenario's requests through v from Concurrency clients to
// a fresh loopback server.
func Run(v Variant, sc Scenario) (Result, error) {
	if v.New == nil {
		return Result{}, fmt.Errorf("%s: not implemented yet", v.Name)
	}
	r := newRun(sc)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		phase := r.arrive()
		rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
		t := time.NewTimer(sc.Latency(rng, r.started.Load(), sc.Requests, phase))
		defer t.Stop()
		select {
		case <-t.C:
			io.WriteString(w, "ok")
		case <-req.Context().Done():
		}
	}))
	defer srv.Close()

	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	base := &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}
	defer base.CloseIdleConnections()
	res := r.drive(v, v.New(base), srv.URL)
	res.Dials = dials.Load()
	return res, nil
}

// run is one run in progress: its clock, its phases and what the server
// has seen.
type run struct {
	sc         Scenario
	start, end time.Time
	timed      bool
	total      int
	started    atomic.Int64
	attempts   []atomic.Int64 // per phase, and one past the last
}

func newRun(sc Scenario) *run {
	var length time.Duration
	for _, p := range sc.Phases {
		length += p.Len
	}
	r := &run{sc: sc, timed: length > 0, total: sc.Requests, attempts: make([]atomic.Int64, len(sc.Phases)+1)}
	if !r.timed {
		r.total = max(r.total, 1)
	}
	// Set before any server or Base goroutine exists, which read them.
	r.start = time.Now()
	r.end = r.start.Add(length)
	return r
}

// phase returns the index of the phase that t falls in.
func (r *run) phase(t time.Time) int {
	since := t.Sub(r.start)
	for i, p := range r.sc.Phases {
		if since < p.Len {
			return i
		}
		since -= p.Len
	}
	return len(r.sc.Phases)
}

// arrive counts an attempt reaching the server and returns its phase's
// name.
func (r *run) arrive() string {
	i := r.phase(time.Now())
	r.attempts[i].Add(1)
	if i < len(r.sc.Phases) {
		return r.sc.Phases[i].Name
	}
	return ""
}

// requestKey carries a request's number in its context, for a simulated
// Base.
type requestKey struct{}

// drive sends requests to url through rt from Concurrency clients until
// the run ends, and summarises them.
func (r *run) drive(v Variant, rt http.RoundTripper, url string) Result {
	type sample struct {
		phase int
		d     time.Duration
		err   bool
	}
	var (
		mu      sync.Mutex
		samples []sample
		delays  []DelayPoint
		wg      sync.WaitGroup
	)
	for range Concurrency {
		wg.Go(func() {
			var local []sample
			for {
				now := time.Now()
				n := r.started.Add(1)
				if (r.timed && !now.Before(r.end)) || (!r.timed && n > int64(r.total)) {
					break
				}
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), requestKey{}, n), 10*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := rt.RoundTrip(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
				local = append(local, sample{r.phase(now), time.Since(now), !ok})
				if n%DelayEvery == 0 {
					if d, ok := hedgeDelay(rt); ok {
						mu.Lock()
						delays = append(delays, DelayPoint{n, time.Since(r.start), d})
						mu.Unlock()
					}
				}
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		})
	}
	wg.Wait()

	res := Result{Variant: v.Name, Scenario: r.sc.Name, Delays: delays}
	slices.SortFunc(res.Delays, func(a, b DelayPoint) int { return int(a.Request - b.Request) })
	summarise := func(name string, keep func(sample) bool, attempts int64) Stats {
		s := Stats{Phase: name, Attempts: attempts}
		var ds []time.Duration
		for _, x := range samples {
			if keep(x) {
				s.Requests++
				if x.err {
					s.Errors++
				}
				ds = append(ds, x.d)
			}
		}
		if len(ds) > 0 {
			slices.Sort(ds)
			at := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
			s.P50, s.P99, s.P999 = at(0.5), at(0.99), at(0.999)
			for _, q := range CDFLevels {
				s.Quantiles = append(s.Quantiles, at(q))
			}
		}
		return s
	}
	var all int64
	for i := range r.attempts {
		all += r.attempts[i].Load()
	}
	res.Total = summarise("run", func(sample) bool { return true }, all)
	for i, p := range r.sc.Phases {
		res.Phases = append(res.Phases, summarise(p.Name, func(x sample) bool { return x.phase == i }, r.attempts[i].Load()))
	}
	return res
}
