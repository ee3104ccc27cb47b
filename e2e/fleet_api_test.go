package e2e

import (
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// quotaAPI is an API on loopback that keeps one token-bucket quota per
// account, as Stripe's or OpenAI's do: rate requests a second, burst at
// once; past it, 429 with Retry-After (the seconds until the next token,
// rounded up: 1 while a token comes every 10 ms) and the RateLimit field
// as such an API sends it (r the tokens left, t the seconds until the
// bucket is full). During a cool-down it answers every request 429 with
// Retry-After until the cool-down ends. It counts what it saw, per worker
// (the X-Worker header), with the time each request arrived.
type quotaAPI struct {
	*httptest.Server
	rate  float64
	burst float64

	mu       sync.Mutex
	start    time.Time
	tokens   float64
	filled   time.Time
	cooling  time.Time // a cool-down until then
	trigger  *coolTrigger
	arrivals []event
}

// coolTrigger starts a cool-down of d at the first request of worker
// ("": any) that arrives at or after after; at is when it did, and by
// is the worker that sent it.
type coolTrigger struct {
	worker string
	by     string
	after  time.Time
	d      time.Duration
	at     time.Time
}

// event is one request the quotaAPI saw.
type event struct {
	at     time.Duration // since the quotaAPI started
	worker string
	status int
}

func startQuotaAPI(t *testing.T, rate float64, burst int) *quotaAPI {
	u := &quotaAPI{rate: rate, burst: float64(burst), start: time.Now(), tokens: float64(burst)}
	u.filled = u.start
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *quotaAPI) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	now := time.Now()
	worker := r.Header.Get("X-Worker")
	if tr := u.trigger; tr != nil && tr.at.IsZero() && (tr.worker == "" || worker == tr.worker) && !now.Before(tr.after) {
		tr.at, tr.by = now, worker
		u.cooling = now.Add(tr.d)
	}
	u.tokens = min(u.burst, u.tokens+now.Sub(u.filled).Seconds()*u.rate)
	u.filled = now
	status := http.StatusOK
	switch {
	case now.Before(u.cooling):
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(u.cooling.Sub(now).Seconds()))))
	case u.tokens < 1:
		status = http.StatusTooManyRequests
		next := (1 - u.tokens) / u.rate
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(next)))))
	default:
		u.tokens--
	}
	full := (u.burst - u.tokens) / u.rate
	w.Header().Set("RateLimit", `"default";r=`+strconv.Itoa(int(u.tokens))+`;t=`+strconv.Itoa(int(math.Ceil(full))))
	u.arrivals = append(u.arrivals, event{now.Sub(u.start), worker, status})
	u.mu.Unlock()
	w.WriteHeader(status)
}

// coolOn makes the first request of worker ("": any) at or after after
// start a cool-down of d: that worker is the one told Retry-After first.
func (u *quotaAPI) coolOn(worker string, after time.Time, d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.trigger = &coolTrigger{worker: worker, after: after, d: d}
}

// triggered returns when the cool-down of coolOn started, since the
// API started, and the worker whose request started it; false if none
// has.
func (u *quotaAPI) triggered() (time.Duration, string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.trigger == nil || u.trigger.at.IsZero() {
		return 0, "", false
	}
	return u.trigger.at.Sub(u.start), u.trigger.by, true
}

// offset returns the time at as an offset since the quotaAPI started.
func (u *quotaAPI) offset(at time.Time) time.Duration { return at.Sub(u.start) }

// seen returns the requests the quotaAPI saw in [from, to) since its
// start (to 0: until now) that match keep (nil: all).
func (u *quotaAPI) seen(from, to time.Duration, keep func(event) bool) []event {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []event
	for _, e := range u.arrivals {
		if e.at >= from && (to == 0 || e.at < to) && (keep == nil || keep(e)) {
			out = append(out, e)
		}
	}
	return out
}

// count returns how many of events have status (0: any).
func count(events []event, status int) int {
	n := 0
	for _, e := range events {
		if status == 0 || e.status == status {
			n++
		}
	}
	return n
}

// deadHost is a host that is down in the way that reaches it: it accepts
// each connection and resets it at once (SO_LINGER 0), before any answer.
// It counts the connections it reset: the requests that reached it.
type deadHost struct {
	ln      net.Listener
	reached atomic.Int64
	done    chan struct{}
}

func startDeadHost(t *testing.T) *deadHost {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &deadHost{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.reached.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-d.done })
	return d
}

func (d *deadHost) URL() string { return "http://" + d.ln.Addr().String() + "/" }
