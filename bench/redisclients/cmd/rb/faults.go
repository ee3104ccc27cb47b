package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rb "github.com/seedhq/httpretry/bench/redisclients"
)

const bound = 5 * time.Millisecond // the per-call deadline the fleet module will use

type rec struct {
	d     time.Duration
	err   error
	wrong bool
}

var dumpOn = os.Getenv("RB_DUMP") != ""
var dumped atomic.Bool

// dumpOnce writes all goroutine stacks to stderr the first time a call is slow.
func dumpOnce() {
	if dumped.CompareAndSwap(false, true) {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	}
}

var holdBase = time.Now().UnixMilli() + 3_600_000

// one performs op with a deadline (0 = context.Background()).
func one(f rb.Fleet, op string, i int, timeout time.Duration) rec {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	s := time.Now()
	if dumpOn {
		t := time.AfterFunc(200*time.Millisecond, dumpOnce)
		defer t.Stop()
	}
	var err error
	wrong := false
	switch op {
	case "lease":
		var g int64
		g, _, err = f.Lease(ctx, "fq"+strconv.Itoa(i&3), 10)
		wrong = err == nil && (g < 0 || g > 10)
	case "get":
		j := i % 200
		var v int64
		v, err = f.GetHold(ctx, "c"+strconv.Itoa(j))
		wrong = err == nil && v != int64(1000+j)
	case "fail":
		var v int64
		v, err = f.BreakerFail(ctx, "fb", 10*time.Second)
		wrong = err == nil && v <= 0
	case "hold":
		_, err = f.Hold(ctx, "fh", holdBase+int64(i))
	case "ping":
		err = f.Ping(ctx)
	}
	return rec{time.Since(s), err, wrong}
}

func emitRecs(scn, phase, op string, recs []rec, extra map[string]any) {
	var ds []time.Duration
	errs, wrong, o6, o10 := 0, 0, 0, 0
	errSample := map[string]int{}
	for _, r := range recs {
		ds = append(ds, r.d)
		if r.err != nil {
			errs++
			e := r.err.Error()
			if len(e) > 70 {
				e = e[:70]
			}
			errSample[e]++
		}
		if r.wrong {
			wrong++
		}
		if r.d > bound+time.Millisecond {
			o6++
		}
		if r.d > 2*bound {
			o10++
		}
	}
	// most frequent error text
	top, topN := "", 0
	for e, c := range errSample {
		if c > topN {
			top, topN = e, c
		}
	}
	m := map[string]any{"test": "fault", "client": *client, "scn": scn, "phase": phase, "op": op,
		"n": len(recs), "errs": errs, "wrong": wrong, "p50_us": rb.US(rb.Pct(ds, .5)), "p99_us": rb.US(rb.Pct(ds, .99)),
		"max_us": rb.US(rb.Max(ds)), "over6ms": o6, "over10ms": o10, "err": top}
	for k, v := range extra {
		m[k] = v
	}
	rb.Emit(m)
}

// seq: per sequential calls of each op with the 5 ms deadline.
func seq(f rb.Fleet, scn, phase string, per int, opsList ...string) {
	for _, op := range opsList {
		recs := make([]rec, 0, per)
		for i := 0; i < per; i++ {
			recs = append(recs, one(f, op, i, bound))
		}
		emitRecs(scn, phase, op, recs, nil)
	}
}

// conc: 16 goroutines mixing get/lease/fail with the 5 ms deadline for d.
func concPhase(f rb.Fleet, scn, phase string, d time.Duration) {
	var mu sync.Mutex
	var all []rec
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	ops := []string{"get", "get", "get", "lease", "fail"}
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var l []rec
			for i := g; time.Now().Before(stop); i += 16 {
				l = append(l, one(f, ops[i%len(ops)], i, bound))
				if len(l) > 20000 {
					break
				}
			}
			mu.Lock()
			all = append(all, l...)
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	emitRecs(scn, phase, "mix16", all, nil)
}

// bg: 3 concurrent calls with NO deadline: what bounds a call if the caller
// forgets a deadline (options only). Gives up waiting after 25 s.
func bg(f rb.Fleet, scn, op string) {
	res := make(chan rec, 3)
	for i := 0; i < 3; i++ {
		go func(i int) { res <- one(f, op, i, 0) }(i)
	}
	var recs []rec
	hung := 0
	timeout := time.After(25 * time.Second)
	for i := 0; i < 3; i++ {
		select {
		case r := <-res:
			recs = append(recs, r)
		case <-timeout:
			hung = 3 - len(recs)
			i = 3
		}
	}
	emitRecs(scn, "nodeadline", op, recs, map[string]any{"hung25s": hung})
}

// recovery: right after the fault is removed, sequential gets (value-checked).
func recovery(f rb.Fleet, scn string) {
	t0 := time.Now()
	first := time.Duration(-1)
	recs := make([]rec, 0, 300)
	for i := 0; i < 300; i++ {
		r := one(f, "get", i, bound)
		if r.err == nil && !r.wrong && first < 0 {
			first = time.Since(t0)
		}
		recs = append(recs, r)
	}
	emitRecs(scn, "recovery", "get", recs, map[string]any{"first_ok_us": rb.US(first)})
	concPhase(f, scn, "recovery", time.Second)
}

func seedKeys(s *rb.Server) {
	var cmds []string
	for j := 0; j < 200; j++ {
		cmds = append(cmds, fmt.Sprintf("SET ns:hold:c%d %d", j, 1000+j))
	}
	if err := s.RawMulti(cmds); err != nil {
		panic(err)
	}
}

func newF(addr string) rb.Fleet {
	f, err := rb.NewFleet(*client, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new client:", err)
		os.Exit(1)
	}
	return f
}

func prime(f rb.Fleet) {
	for i := 0; i < 50; i++ {
		for _, op := range []string{"get", "lease", "fail", "hold"} {
			one(f, op, i, time.Second)
		}
	}
}

func want(s string) bool { return *only == "" || strings.Contains(*only, s) }

func faults() {
	srv := rb.StartRedis(0)
	defer srv.Kill()
	seedKeys(srv)
	px := rb.NewProxy(srv.Addr())
	defer px.Close()

	if want("baseline") { // no fault, through the proxy: what the box itself costs
		px.Set(rb.ModePass, 0, nil)
		f := newF(px.Addr())
		prime(f)
		seq(f, "baseline", "fault", 300, "get", "lease", "fail")
		concPhase(f, "baseline", "fault", time.Second)
		f.Close()
		px.ResetAll()
	}
	if want("down-fresh") {
		t := time.Now()
		f, err := rb.NewFleet(*client, rb.DeadAddr())
		e := ""
		if err != nil {
			e = err.Error()
		}
		rb.Emit(map[string]any{"test": "fault", "client": *client, "scn": "down-fresh", "phase": "ctor",
			"ctor_us": rb.US(time.Since(t)), "err": e})
		if err == nil {
			seq(f, "down-fresh", "fault", 100, "get", "lease", "fail")
			bg(f, "down-fresh", "get")
			f.Close()
		}
	}
	if want("down-after-up") {
		s2 := rb.StartRedis(0)
		seedKeys(s2)
		f := newF(s2.Addr())
		prime(f)
		s2.Kill()
		time.Sleep(20 * time.Millisecond)
		seq(f, "down-after-up", "fault", 100, "get", "lease", "fail")
		concPhase(f, "down-after-up", "fault", time.Second)
		bg(f, "down-after-up", "get")
		f.Close()
	}
	for _, sc := range []struct {
		name  string
		mode  int32
		delay time.Duration
	}{{"delay50", rb.ModeDelay, 25 * time.Millisecond}, {"blackhole", rb.ModeBlackhole, 0}} {
		if !want(sc.name) {
			continue
		}
		px.Set(rb.ModePass, 0, nil)
		f := newF(px.Addr())
		prime(f)
		px.Set(sc.mode, sc.delay, nil)
		seq(f, sc.name, "fault", 100, "get", "lease", "fail")
		concPhase(f, sc.name, "fault", time.Second)
		bg(f, sc.name, "get")
		px.Set(rb.ModePass, 0, nil)
		recovery(f, sc.name)
		f.Close()
		px.ResetAll()
	}
	if want("reset") {
		px.Set(rb.ModePass, 0, nil)
		f := newF(px.Addr())
		prime(f)
		stop := make(chan struct{})
		var resets atomic.Int64
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					resets.Add(int64(px.ResetAll()))
				}
			}
		}()
		concPhase(f, "reset", "fault", 2*time.Second)
		close(stop)
		recovery(f, "reset")
		f.Close()
		px.ResetAll()
	}
	junks := []struct{ name, b string }{
		{"bulk", "$4\r\n1042\r\n"},
		{"int", ":1042\r\n"},
		{"error", "-ERR junk\r\n"},
		{"random", ""},
		{"bigbulk", "$1000000000\r\n"},
		{"bigarray", "*10000000\r\n"},
	}
	rnd := rand.New(rand.NewSource(1))
	for _, j := range junks {
		if !want("junk-" + j.name) {
			continue
		}
		b := []byte(j.b)
		if j.name == "random" {
			b = make([]byte, 64)
			rnd.Read(b)
		}
		px.Set(rb.ModePass, 0, nil)
		f := newF(px.Addr())
		prime(f)
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		px.Set(rb.ModeJunk, 0, b)
		seq(f, "junk-"+j.name, "fault", 50, "get", "lease", "fail")
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		rb.Emit(map[string]any{"test": "fault", "client": *client, "scn": "junk-" + j.name, "phase": "mem",
			"alloc_mb": float64(m1.TotalAlloc-m0.TotalAlloc) / 1e6, "heap_sys_mb": float64(m1.HeapSys) / 1e6})
		px.Set(rb.ModePass, 0, nil)
		recovery(f, "junk-"+j.name)
		f.Close()
		px.ResetAll()
	}
	if want("restart") {
		restart()
	}
}

// restart: SIGKILL redis, start an empty one on the same port 200 ms later.
// A poller calls Lease every ms (5 ms deadline) throughout; a subscriber (same
// kind, separate client) counts (re)subscriptions; a publisher sends a Hold every
// 5 ms after the restart. Reports reconnect time, script reload, resubscribe
// time, and messages published OK but never received.
func restart() {
	s := rb.StartRedis(0)
	defer s.Kill()
	f := newF(s.Addr())
	defer f.Close()
	sub := newF(s.Addr())
	defer sub.Close()
	pub := newF(s.Addr())
	defer pub.Close()
	prime(f)
	prime(pub)

	var subs atomic.Int64
	var lastSub atomic.Int64 // unix ns
	recv := sync.Map{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sub.Subscribe(ctx, func(m string) {
		flds := strings.Fields(m)
		if len(flds) == 3 {
			recv.Store(flds[2], time.Now().UnixNano())
		}
	}, func() { subs.Add(1); lastSub.Store(time.Now().UnixNano()) })
	for subs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	type pr struct {
		at time.Time
		r  rec
	}
	var polls []pr
	var pmu sync.Mutex
	pollStop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for i := 0; ; i++ {
			select {
			case <-pollStop:
				return
			default:
			}
			t := time.Now()
			r := one(f, "lease", i, bound)
			pmu.Lock()
			polls = append(polls, pr{t, r})
			pmu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	tKill := time.Now()
	s.Restart(200 * time.Millisecond)
	tUp := time.Now()
	// publisher: a Hold every 5 ms for 3 s after the restart
	type pubrec struct {
		at time.Time
		v  string
	}
	var pubs []pubrec
	for i := 0; i < 600; i++ {
		v := holdBase + 1_000_000 + int64(i)
		c, cc := context.WithTimeout(context.Background(), bound)
		ch, err := pub.Hold(c, "rs", v)
		cc()
		if err == nil && ch {
			pubs = append(pubs, pubrec{time.Now(), strconv.FormatInt(v, 10)})
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(pollStop)
	pwg.Wait()

	// poll analysis
	var during, after []rec
	firstOK := time.Duration(-1)
	var failsAfterUp int
	for _, p := range polls {
		if p.at.Before(tKill) {
			continue
		}
		if p.at.Before(tUp) {
			during = append(during, p.r)
			continue
		}
		after = append(after, p.r)
		if p.r.err == nil && firstOK < 0 {
			firstOK = p.at.Add(p.r.d).Sub(tUp)
		}
		if p.r.err != nil && firstOK < 0 {
			failsAfterUp++
		}
	}
	emitRecs("restart", "down", "lease", during, nil)
	emitRecs("restart", "afterup", "lease", after, map[string]any{"first_ok_after_up_us": rb.US(firstOK), "fails_before_first_ok": failsAfterUp})
	// pub/sub analysis
	resub := time.Duration(-1)
	if ls := lastSub.Load(); ls > tUp.UnixNano() {
		resub = time.Duration(ls - tUp.UnixNano())
	}
	lost, got := 0, 0
	var lastLost time.Duration
	firstPub := time.Duration(-1)
	for _, p := range pubs {
		if firstPub < 0 {
			firstPub = p.at.Sub(tUp)
		}
		if _, ok := recv.Load(p.v); ok {
			got++
		} else {
			lost++
			lastLost = p.at.Sub(tUp)
		}
	}
	rb.Emit(map[string]any{"test": "fault", "client": *client, "scn": "restart", "phase": "pubsub",
		"subs_total": subs.Load(), "resub_after_up_us": rb.US(resub), "published": len(pubs),
		"first_pub_ok_after_up_us": rb.US(firstPub), "received": got, "lost": lost, "last_lost_after_up_us": rb.US(lastLost)})
}
