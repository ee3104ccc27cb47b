// rb is the measurement driver. Each invocation measures one client kind, so
// rounds can run as separate processes in rotating order (see run_rounds.sh).
//
//	rb -mode lat    -client K -addr A -op lease|hold|fail|trial|open|ping [-conc 16]
//	rb -mode pubsub -client K -addr A
//	rb -mode fault  -client K        (starts its own redis-server + proxy)
//	rb -mode cache  -client K        (starts its own redis-server)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	rb "github.com/seedhq/httpretry/bench/redisclients"
)

var (
	mode   = flag.String("mode", "lat", "lat|pubsub|fault|cache")
	client = flag.String("client", "rueidis", "client kind")
	addr   = flag.String("addr", "", "redis address (lat/pubsub)")
	opName = flag.String("op", "lease", "operation")
	n      = flag.Int("n", 5000, "sequential calls")
	conc   = flag.Int("conc", 16, "goroutines for the concurrent phase")
	dur    = flag.Duration("dur", 2*time.Second, "concurrent phase duration")
	relax  = flag.Bool("relax", true, "use 1s socket timeouts for lat/pubsub (speed, not timeouts)")
	only   = flag.String("only", "", "fault: run only this scenario")
)

func main() {
	flag.Parse()
	switch *mode {
	case "lat":
		rb.BenchTimeouts = *relax
		lat()
	case "pubsub":
		rb.BenchTimeouts = *relax
		pubsub()
	case "fault":
		faults()
	case "cache":
		cache()
	default:
		fmt.Fprintln(os.Stderr, "unknown mode")
		os.Exit(2)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fatal:", err)
		os.Exit(1)
	}
	return v
}

// Op returns a closure performing one operation; i makes keys/values vary.
func Op(f rb.Fleet, name string) func(ctx context.Context, i int) error {
	base := time.Now().UnixMilli() + 60_000
	switch name {
	case "lease":
		return func(ctx context.Context, i int) error {
			_, _, err := f.Lease(ctx, "q"+strconv.Itoa(i&7), 10)
			return err
		}
	case "hold":
		return func(ctx context.Context, i int) error {
			_, err := f.Hold(ctx, "h"+strconv.Itoa(i&7), base+int64(i))
			return err
		}
	case "fail":
		return func(ctx context.Context, i int) error {
			_, err := f.BreakerFail(ctx, "b"+strconv.Itoa(i&7), 10*time.Second)
			return err
		}
	case "trial":
		return func(ctx context.Context, i int) error {
			_, err := f.BreakerTrial(ctx, "b"+strconv.Itoa(i&7), "me", 50*time.Millisecond)
			return err
		}
	case "open":
		return func(ctx context.Context, i int) error {
			return f.BreakerOpen(ctx, "b"+strconv.Itoa(i&7), base+int64(i), time.Minute)
		}
	case "ping":
		return func(ctx context.Context, i int) error { return f.Ping(ctx) }
	case "get":
		return func(ctx context.Context, i int) error { _, err := f.GetHold(ctx, "h"+strconv.Itoa(i&7)); return err }
	}
	panic("unknown op " + name)
}

func lat() {
	f := must(rb.NewFleet(*client, *addr))
	defer f.Close()
	op := Op(f, *opName)
	ctx := context.Background()
	for i := 0; i < 1000; i++ { // warm up, load scripts, fill pools
		op(ctx, i)
	}
	// single goroutine
	ds := make([]time.Duration, 0, *n)
	errs := 0
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		s := time.Now()
		if op(ctx, i) != nil {
			errs++
		}
		ds = append(ds, time.Since(s))
	}
	el := time.Since(t0)
	rb.Emit(map[string]any{"test": "lat", "client": *client, "op": *opName, "conc": 1,
		"p50_us": rb.US(rb.Pct(ds, .5)), "p99_us": rb.US(rb.Pct(ds, .99)), "ops_s": float64(*n) / el.Seconds(), "errs": errs})

	// concurrent
	var wg sync.WaitGroup
	per := make([][]time.Duration, *conc)
	perr := make([]int, *conc)
	stop := time.Now().Add(*dur)
	t0 = time.Now()
	for g := 0; g < *conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			l := make([]time.Duration, 0, 100000)
			for i := g; time.Now().Before(stop); i += *conc {
				s := time.Now()
				if op(ctx, i) != nil {
					perr[g]++
				}
				l = append(l, time.Since(s))
			}
			per[g] = l
		}(g)
	}
	wg.Wait()
	el = time.Since(t0)
	var all []time.Duration
	errs = 0
	for g := range per {
		all = append(all, per[g]...)
		errs += perr[g]
	}
	rb.Emit(map[string]any{"test": "lat", "client": *client, "op": *opName, "conc": *conc,
		"p50_us": rb.US(rb.Pct(all, .5)), "p99_us": rb.US(rb.Pct(all, .99)), "ops_s": float64(len(all)) / el.Seconds(), "errs": errs})
}

// pubsub: one client subscribes; the same kind publishes through the Hold
// script; latency = Hold call start -> message handed to our callback.
func pubsub() {
	sub := must(rb.NewFleet(*client, *addr))
	pub := must(rb.NewFleet(*client, *addr))
	defer sub.Close()
	defer pub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan time.Time, 1024)
	subbed := make(chan struct{}, 4)
	go sub.Subscribe(ctx, func(m string) { got <- time.Now() }, func() { subbed <- struct{}{} })
	select {
	case <-subbed:
	case <-time.After(3 * time.Second):
		fmt.Fprintln(os.Stderr, "no subscription")
		os.Exit(1)
	}
	base := time.Now().UnixMilli() + 600_000
	var ds []time.Duration
	lost := 0
	for i := 0; i < 300+*n/5; i++ {
		s := time.Now()
		if _, err := pub.Hold(ctx, "p", base+int64(i)); err != nil {
			lost++
			continue
		}
		select {
		case r := <-got:
			if i >= 300 {
				ds = append(ds, r.Sub(s))
			}
		case <-time.After(time.Second):
			lost++
		}
	}
	rb.Emit(map[string]any{"test": "pubsub", "client": *client, "p50_us": rb.US(rb.Pct(ds, .5)),
		"p99_us": rb.US(rb.Pct(ds, .99)), "n": len(ds), "lost": lost})
}
