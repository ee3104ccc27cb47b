package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	rb "github.com/seedhq/httpretry/bench/redisclients"
)

// cache compares the zero-round-trip read paths:
//
//	-client goredis|rueidis             pub/sub-fed LocalView with resync (SCAN) on every (re)subscribe
//	-client goredis-naive|rueidis-naive pub/sub-fed LocalView, no resync
//	-client rueidis-csc                 rueidis DoCache (RESP3 CLIENT TRACKING), ttl 10 s
//	-client goredis-csc                 go-redis experimental CSC (ClientSideCacheConfig), plain GET
//
// A: invalidation. A writer updates ns:hold:ck 300 times, 10 ms apart; the reader
// spins on its read path; staleness = time from the writer's Hold returning to
// the reader first seeing the value. Also counts reads that cost a round trip.
// B: restart. SIGKILL + empty restart. Truth afterwards: ck gone; a new hold ck2
// written right after the restart. Measures how long the reader keeps showing the
// dead ck and how long until it sees ck2; and the slowest read during the outage.

type reader struct {
	read   func(ctx context.Context, key string) (int64, error)
	rts    func() int64 // reads that went to Redis
	close  func()
	resubs *atomic.Int64
}

func newReader(kind string, addr string) *reader {
	switch kind {
	case "goredis", "rueidis", "goredis-naive", "rueidis-naive":
		base := kind
		resync := true
		if k, ok := cutSuffix(kind, "-naive"); ok {
			base, resync = k, false
		}
		f := must(rb.NewFleet(base, addr))
		v := rb.NewLocalView()
		ctx, cancel := context.WithCancel(context.Background())
		resubs := &atomic.Int64{}
		doResync := func() {
			c, cc := context.WithTimeout(ctx, time.Second)
			defer cc()
			var m map[string]int64
			var err error
			switch x := f.(type) {
			case *rb.GoRedis:
				m, err = x.ScanHolds(c)
			case *rb.Rueidis:
				m, err = x.ScanHolds(c)
			}
			if err != nil {
				return
			}
			for _, k := range v.Keys() {
				if _, ok := m[k[len("hold "):]]; !ok && len(k) > 5 && k[:5] == "hold " {
					v.Replace(k, 0)
				}
			}
			for k, ms := range m {
				v.Replace("hold "+k, ms)
			}
		}
		go f.Subscribe(ctx, v.OnMessage, func() {
			resubs.Add(1)
			if resync {
				go doResync()
			}
		})
		for resubs.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		return &reader{
			read:   func(_ context.Context, key string) (int64, error) { return v.Until("hold " + key), nil },
			rts:    func() int64 { return 0 },
			close:  func() { cancel(); f.Close() },
			resubs: resubs,
		}
	case "rueidis-csc":
		f := must(rb.NewFleet("rueidis", addr)).(*rb.Rueidis)
		var misses atomic.Int64
		return &reader{
			read: func(ctx context.Context, key string) (int64, error) {
				v, hit, err := f.GetHoldCached(ctx, key, 10*time.Second)
				if !hit {
					misses.Add(1)
				}
				return v, err
			},
			rts: misses.Load, close: f.Close, resubs: &atomic.Int64{},
		}
	case "goredis-csc":
		f := must(rb.NewFleet("goredis-csc", addr)).(*rb.GoRedis)
		return &reader{
			read:  f.GetHold,
			rts:   func() int64 { return int64(f.C.CSCStats().Misses) },
			close: f.Close, resubs: &atomic.Int64{},
		}
	}
	fmt.Fprintln(os.Stderr, "unknown cache kind", kind)
	os.Exit(2)
	return nil
}

func cutSuffix(s, suf string) (string, bool) {
	if len(s) >= len(suf) && s[len(s)-len(suf):] == suf {
		return s[:len(s)-len(suf)], true
	}
	return s, false
}

func writerKind() string {
	if len(*client) >= 7 && (*client)[:7] == "goredis" {
		return "goredis"
	}
	return "rueidis"
}

// spin runs the reader loop: every read with a 5 ms deadline; calls see(v, t).
func spin(r *reader, key string, stop <-chan struct{}, see func(v int64, t time.Time, d time.Duration, err error)) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		s := time.Now()
		v, err := r.read(ctx, key)
		d := time.Since(s)
		cancel()
		see(v, s, d, err)
		runtime.Gosched()
	}
}

func cache() {
	srv := rb.StartRedis(0)
	defer srv.Kill()
	w := must(rb.NewFleet(writerKind(), srv.Addr()))
	defer w.Close()
	ctx := context.Background()
	base := time.Now().UnixMilli() + 3_600_000
	w.Hold(ctx, "ck", base)
	r := newReader(*client, srv.Addr())
	defer r.close()

	// ---- A: invalidation
	var mu sync.Mutex
	firstSeen := map[int64]time.Time{}
	var reads atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		spin(r, "ck", stop, func(v int64, t time.Time, d time.Duration, err error) {
			reads.Add(1)
			if err == nil {
				mu.Lock()
				if _, ok := firstSeen[v]; !ok {
					firstSeen[v] = t.Add(d)
				}
				mu.Unlock()
			}
		})
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	rt0, n0, t0 := r.rts(), reads.Load(), time.Now()
	written := map[int64]time.Time{}
	for i := 1; i <= 300; i++ {
		v := base + int64(i)
		c, cc := context.WithTimeout(ctx, time.Second)
		if ch, err := w.Hold(c, "ck", v); err == nil && ch {
			written[v] = time.Now()
		}
		cc()
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-done
	el := time.Since(t0)
	var st []time.Duration
	never := 0
	mu.Lock()
	for v, wt := range written {
		if ft, ok := firstSeen[v]; ok {
			d := ft.Sub(wt)
			if d < 0 {
				d = 0
			}
			st = append(st, d)
		} else {
			never++ // overwritten before the reader saw it, or lost
		}
	}
	mu.Unlock()
	nr := reads.Load() - n0
	rb.Emit(map[string]any{"test": "cache", "client": *client, "phase": "invalidation", "updates": len(written),
		"stale_p50_us": rb.US(rb.Pct(st, .5)), "stale_p99_us": rb.US(rb.Pct(st, .99)), "stale_max_us": rb.US(rb.Max(st)),
		"never_seen": never, "reads": nr, "reads_per_s": float64(nr) / el.Seconds(), "reads_with_rt": r.rts() - rt0})

	// ---- B: restart
	last := base + 300
	var lastV atomic.Int64
	var ck2V atomic.Int64
	var maxRead atomic.Int64
	var readErrs atomic.Int64
	var goneAt, ck2At atomic.Int64 // unix ns
	stop = make(chan struct{})
	done2 := make(chan struct{})
	go func() {
		spin(r, "ck", stop, func(v int64, t time.Time, d time.Duration, err error) {
			if int64(d) > maxRead.Load() {
				maxRead.Store(int64(d))
			}
			if err != nil {
				readErrs.Add(1)
				return
			}
			lastV.Store(v)
			if v == 0 && goneAt.Load() == 0 {
				goneAt.Store(time.Now().UnixNano())
			}
		})
		close(done2)
	}()
	stop2 := make(chan struct{})
	done3 := make(chan struct{})
	go func() {
		spin(r, "ck2", stop2, func(v int64, t time.Time, d time.Duration, err error) {
			if int64(d) > maxRead.Load() {
				maxRead.Store(int64(d))
			}
			if err == nil && v != 0 {
				ck2V.Store(v)
				if ck2At.Load() == 0 {
					ck2At.Store(time.Now().UnixNano())
				}
			}
		})
		close(done3)
	}()
	time.Sleep(100 * time.Millisecond)
	if lastV.Load() != last {
		fmt.Fprintln(os.Stderr, "reader not at last value before restart:", lastV.Load(), last)
	}
	srv.Restart(200 * time.Millisecond)
	tUp := time.Now()
	ck2 := base + 999
	var ck2Written time.Duration = -1
	for time.Since(tUp) < 3*time.Second {
		c, cc := context.WithTimeout(ctx, bound)
		_, err := w.Hold(c, "ck2", ck2)
		cc()
		if err == nil {
			ck2Written = time.Since(tUp)
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	close(stop2)
	<-done2
	<-done3
	rel := func(a *atomic.Int64) float64 {
		if a.Load() == 0 {
			return -1
		}
		return rb.US(time.Duration(a.Load() - tUp.UnixNano()))
	}
	rb.Emit(map[string]any{"test": "cache", "client": *client, "phase": "restart",
		"ck2_written_after_up_us": rb.US(ck2Written), "dead_ck_cleared_after_up_us": rel(&goneAt),
		"ck2_seen_after_up_us": rel(&ck2At), "ck_still_shown_at_end": lastV.Load() == last, "ck2_seen": ck2V.Load() == ck2,
		"max_read_us": rb.US(time.Duration(maxRead.Load())), "read_errs": readErrs.Load(), "resubs": r.resubs.Load()})
}
