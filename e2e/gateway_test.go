package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// gatewayPolicy retries fast: these tests are about what nginx answers.
var gatewayPolicy = httpretry.Policy{
	MaxAttempts: 3, Backoff: backoff.Constant(20 * time.Millisecond), NewBudget: httpretry.NoBudget,
}

// TestGateway502 puts nginx in front of an upstream that is down (killed),
// or that dies in the middle of a request: nginx answers 502 itself.
func TestGateway502(t *testing.T) {
	l := newLedger()
	up := startUpstream(t, l, nil, nil)
	ng := startNginx(t, up.addr)
	restart := func(a httpretry.Attempt) {
		if a.N == 1 && a.Retry {
			if err := up.start(); err != nil {
				t.Error(err)
			}
		}
	}
	cases := []struct {
		name, method, payload string
		unkeyed               bool                    // a POST without an Idempotency-Key
		then                  func(httpretry.Attempt) // between attempts
		midRequest            bool                    // kill the upstream while it answers
		attempts, status      int
		stop                  httpretry.StopReason
		applied               int
	}{
		{name: "GET to a dead upstream: 502, retried once it is back",
			method: "GET", then: restart, attempts: 2, status: 200, stop: httpretry.StopSuccess},
		{name: "keyed POST to a dead upstream: 502, retried, applied once",
			method: "POST", payload: "amount=1", then: restart, attempts: 2, status: 200, stop: httpretry.StopSuccess, applied: 1},
		{name: "unkeyed POST to a dead upstream: nginx's 502 returned untouched",
			method: "POST", unkeyed: true, payload: "amount=1", then: restart, attempts: 1, status: 502, stop: httpretry.StopNotReplayable},
		{name: "GET, the upstream stays dead: the last 502 returned untouched",
			method: "GET", attempts: 3, status: 502, stop: httpretry.StopAttempts},
		{name: "keyed POST, the upstream dies after applying it: 502, retried, applied once",
			method: "POST", payload: "amount=2", midRequest: true, then: restart,
			attempts: 2, status: 200, stop: httpretry.StopSuccess, applied: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up.kill()
			if tc.midRequest {
				if err := up.start(); err != nil {
					t.Fatal(err)
				}
				l.delay.Store(int64(5 * time.Second))
				applied := l.applied.Load()
				go func() { // kill it once it has applied the payment
					for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
						if l.applied.Load() > applied {
							break
						}
					}
					up.kill()
				}()
			}
			rec := &recorder{then: func(a httpretry.Attempt) {
				l.delay.Store(0)
				if tc.then != nil {
					tc.then(a)
				}
			}}
			p := gatewayPolicy
			if tc.unkeyed {
				p = unkeyed(p)
			}
			rt := rec.transport(freshBase(t), p)
			before := l.applied.Load()
			r := mustSend(t, rt, tc.method, ng.url+"/pay", tc.payload, nil)
			recs := rec.all()
			if len(recs) != tc.attempts || r.status != tc.status || recs[len(recs)-1].stop != tc.stop {
				t.Fatalf("%d attempts, status %d (%v), stop %v; want %d, %d, %v: %+v",
					len(recs), r.status, r.err, recs[len(recs)-1].stop, tc.attempts, tc.status, tc.stop, recs)
			}
			if recs[0].status != http.StatusBadGateway {
				t.Errorf("first attempt: status %d (%v), want nginx's 502", recs[0].status, recs[0].err)
			}
			if r.status == 502 && (!strings.HasPrefix(r.header.Get("Server"), "nginx") || !strings.Contains(r.body, "502 Bad Gateway")) {
				t.Errorf("returned 502 not nginx's own, untouched: Server %q, body %q", r.header.Get("Server"), r.body)
			}
			if got := int(l.applied.Load() - before); got != tc.applied {
				t.Errorf("applied %d times, want %d", got, tc.applied)
			}
			figure(t, "Gateway: nginx", "%s: statuses %v, %d attempt(s), applied %d",
				tc.name, statuses(recs), len(recs), tc.applied)
		})
	}
}

// TestGateway504 puts nginx, with a 300 ms read timeout, in front of an
// upstream that applies a payment and then takes a second to answer.
func TestGateway504(t *testing.T) {
	l := newLedger()
	up := startUpstream(t, l, nil, nil)
	ng := startNginx(t, up.addr)
	cases := []struct {
		name, method, payload string
		unkeyed               bool
		attempts, status      int
		stop                  httpretry.StopReason
		applied               int
	}{
		{name: "GET: 504, retried", method: "GET", attempts: 2, status: 200, stop: httpretry.StopSuccess},
		{name: "keyed POST applied before the 504: retried, answered from the stored result, applied once",
			method: "POST", payload: "amount=3", attempts: 2, status: 200, stop: httpretry.StopSuccess, applied: 1},
		{name: "unkeyed POST applied before the 504: not retried, the 504 returned",
			method: "POST", unkeyed: true, payload: "amount=3", attempts: 1, status: 504, stop: httpretry.StopNotReplayable, applied: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l.delay.Store(int64(time.Second))
			rec := &recorder{then: func(httpretry.Attempt) { l.delay.Store(0) }}
			p := gatewayPolicy
			if tc.unkeyed {
				p = unkeyed(p)
			}
			rt := rec.transport(freshBase(t), p)
			before := l.applied.Load()
			r := mustSend(t, rt, tc.method, ng.url+"/slow/pay", tc.payload, nil)
			recs := rec.all()
			if len(recs) != tc.attempts || r.status != tc.status || recs[len(recs)-1].stop != tc.stop {
				t.Fatalf("%d attempts, status %d (%v); want %d, %d, %v: %+v",
					len(recs), r.status, r.err, tc.attempts, tc.status, tc.stop, recs)
			}
			if recs[0].status != http.StatusGatewayTimeout {
				t.Errorf("first attempt: status %d (%v), want nginx's 504", recs[0].status, recs[0].err)
			}
			if tc.method == "POST" && !tc.unkeyed && r.header.Get("Idempotent-Replayed") != "true" {
				t.Error("the retry was not answered from the stored result")
			}
			if got := int(l.applied.Load() - before); got != tc.applied {
				t.Errorf("applied %d times, want %d", got, tc.applied)
			}
			figure(t, "Gateway: nginx", "%s: statuses %v, %d attempt(s), applied %d",
				tc.name, statuses(recs), len(recs), tc.applied)
		})
	}
}

// TestGateway429 sends two requests in a row to a location that nginx
// limits to one a second: the second gets nginx's 429 with the Retry-After
// of one second that the configuration adds.
func TestGateway429(t *testing.T) {
	l := newLedger()
	up := startUpstream(t, l, nil, nil)
	t.Run("Retry-After obeyed, never shortened", func(t *testing.T) {
		ng := startNginx(t, up.addr)
		rec := &recorder{}
		rt := rec.transport(freshBase(t), gatewayPolicy)
		if r := mustSend(t, rt, "GET", ng.url+"/limited/", "", nil); r.status != 200 {
			t.Fatalf("first request: %d %v", r.status, r.err)
		}
		start := time.Now()
		r := mustSend(t, rt, "GET", ng.url+"/limited/", "", nil)
		elapsed := time.Since(start)
		recs := rec.all()[1:]
		if r.status != 200 || len(recs) != 2 || recs[0].status != 429 {
			t.Fatalf("status %d (%v), attempts %+v: want 429 then 200", r.status, r.err, recs)
		}
		if recs[0].source != "retry-after" || recs[0].delay < time.Second || recs[0].delay > 1100*time.Millisecond {
			t.Errorf("waited %v from %q, want 1s to 1.1s from retry-after", recs[0].delay, recs[0].source)
		}
		if elapsed < time.Second {
			t.Errorf("second request took %v: the wait was shorter than Retry-After", elapsed)
		}
		figure(t, "Gateway: nginx", "429 with Retry-After: 1 from limit_req: waited %v (source %s), then 200; the call took %v",
			recs[0].delay.Round(time.Millisecond), recs[0].source, elapsed.Round(time.Millisecond))
	})
	t.Run("Retry-After above MaxRetryAfter: the 429 returned at once", func(t *testing.T) {
		ng := startNginx(t, up.addr)
		rec := &recorder{}
		p := gatewayPolicy
		p.MaxRetryAfter = 500 * time.Millisecond
		rt := rec.transport(freshBase(t), p)
		mustSend(t, rt, "GET", ng.url+"/limited/", "", nil)
		start := time.Now()
		r := mustSend(t, rt, "GET", ng.url+"/limited/", "", nil)
		elapsed := time.Since(start)
		last := rec.last()
		if r.status != 429 || r.header.Get("Retry-After") != "1" || last.stop != httpretry.StopRetryAfter || last.n != 1 {
			t.Fatalf("status %d, Retry-After %q, stop %v after %d attempt(s): want nginx's 429 untouched, StopRetryAfter",
				r.status, r.header.Get("Retry-After"), last.stop, last.n)
		}
		figure(t, "Gateway: nginx", "429 asking for 1s with MaxRetryAfter 500ms: returned to the caller after %v, stop %q",
			elapsed.Round(100*time.Microsecond), last.stop)
	})
}

// statuses lists each attempt's status, or "error".
func statuses(recs []attemptRec) []string {
	var s []string
	for _, r := range recs {
		if r.err != nil {
			s = append(s, "error")
		} else {
			s = append(s, http.StatusText(r.status))
		}
	}
	return s
}
