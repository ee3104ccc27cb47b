package e2e

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// toxicUpstream serves the ledger, plus /big (a 10,000-byte body) and
// /eof (a body delimited by closing the connection, as HTTP/1.0 does).
func toxicUpstream(l *ledger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", l)
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000")
		io.WriteString(w, strings.Repeat("x", 10000))
	})
	mux.HandleFunc("/eof", func(w http.ResponseWriter, r *http.Request) {
		// No length and no chunking: the end of the connection ends the body.
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ncomplete")
		buf.Flush()
	})
	return mux
}

// TestToxics sends one logical request through each toxiproxy fault. The
// fault is on for the first attempt; if that attempt is retried, the fault
// is cleared from OnAttempt, before the wait, so that the second attempt
// goes through a clean proxy.
func TestToxics(t *testing.T) {
	x := startToxiproxy(t)
	l := newLedger()
	up := httptest.NewServer(toxicUpstream(l))
	t.Cleanup(up.Close)

	type want struct {
		attempts int
		status   int                  // 0: an error
		first    httpretry.Class      // the first attempt's class
		stop     httpretry.StopReason // the last attempt's
		applied  int                  // times the payment was applied
	}
	cases := []struct {
		name           string
		fault          toxic
		method, path   string
		payload        string
		unkeyed        bool // a POST without an Idempotency-Key
		attemptTimeout time.Duration
		want           want
		check          func(t *testing.T, r result, recs []attemptRec, elapsed time.Duration)
	}{{
		name:   "reset_peer on the response: GET retried",
		fault:  toxic{typ: "reset_peer", stream: "downstream", attrs: toxiclient.Attributes{"timeout": 0}},
		method: "GET", path: "/",
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess},
		check: func(t *testing.T, r result, recs []attemptRec, _ time.Duration) {
			if !errors.Is(recs[0].err, syscall.ECONNRESET) && !errors.Is(recs[0].err, io.EOF) {
				t.Errorf("first attempt: %v, want a connection reset", recs[0].err)
			}
		},
	}, {
		name:   "reset_peer after the server applied: keyed POST retried, applied once",
		fault:  toxic{typ: "reset_peer", stream: "downstream", attrs: toxiclient.Attributes{"timeout": 0}},
		method: "POST", path: "/pay", payload: "amount=100",
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess, applied: 1},
		check: func(t *testing.T, r result, recs []attemptRec, _ time.Duration) {
			if recs[0].key == "" || recs[0].key != recs[1].key {
				t.Errorf("keys %q and %q: want one key, the same on both attempts", recs[0].key, recs[1].key)
			}
			if r.header.Get("Idempotent-Replayed") != "true" {
				t.Error("the retry was not answered from the stored result")
			}
		},
	}, {
		name:   "reset_peer after the server applied: unkeyed POST not retried",
		fault:  toxic{typ: "reset_peer", stream: "downstream", attrs: toxiclient.Attributes{"timeout": 0}},
		method: "POST", path: "/pay", payload: "amount=100", unkeyed: true,
		want: want{attempts: 1, first: httpretry.ClassTransient, stop: httpretry.StopNotReplayable, applied: 1},
	}, {
		name:   "timeout on the request (black hole): attempt timeout, GET retried",
		fault:  toxic{typ: "timeout", stream: "upstream", attrs: toxiclient.Attributes{"timeout": 0}},
		method: "GET", path: "/", attemptTimeout: 300 * time.Millisecond,
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess},
		check: func(t *testing.T, r result, recs []attemptRec, _ time.Duration) {
			if !errors.Is(recs[0].err, httpretry.ErrAttemptTimeout) {
				t.Errorf("first attempt: %v, want ErrAttemptTimeout", recs[0].err)
			}
		},
	}, {
		name:   "timeout closing the connection after 200ms without an answer: GET retried",
		fault:  toxic{typ: "timeout", stream: "downstream", attrs: toxiclient.Attributes{"timeout": 200}},
		method: "GET", path: "/",
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess},
	}, {
		name: "latency 400ms ± 100ms above the attempt timeout: GET retried",
		fault: toxic{typ: "latency", stream: "downstream",
			attrs: toxiclient.Attributes{"latency": 400, "jitter": 100}},
		method: "GET", path: "/", attemptTimeout: 200 * time.Millisecond,
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess},
	}, {
		name: "latency 40ms ± 30ms below the attempt timeout: no retry",
		fault: toxic{typ: "latency", stream: "downstream",
			attrs: toxiclient.Attributes{"latency": 40, "jitter": 30}},
		method: "POST", path: "/pay", payload: "amount=7", attemptTimeout: time.Second,
		want: want{attempts: 1, status: 200, first: httpretry.ClassSuccess, stop: httpretry.StopSuccess, applied: 1},
	}, {
		name:   "slow_close on a body delimited by EOF: the body streams past the attempt timeout",
		fault:  toxic{typ: "slow_close", stream: "downstream", attrs: toxiclient.Attributes{"delay": 300}},
		method: "GET", path: "/eof", attemptTimeout: 100 * time.Millisecond,
		want: want{attempts: 1, status: 200, first: httpretry.ClassSuccess, stop: httpretry.StopSuccess},
		check: func(t *testing.T, r result, _ []attemptRec, elapsed time.Duration) {
			if r.err != nil || r.body != "complete" || elapsed < 300*time.Millisecond {
				t.Errorf("body %q, error %v after %v: want the whole body after the 300ms close", r.body, r.err, elapsed)
			}
		},
	}, {
		name:   "limit_data inside the response header: GET retried",
		fault:  toxic{typ: "limit_data", stream: "downstream", attrs: toxiclient.Attributes{"bytes": 10}},
		method: "GET", path: "/",
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess},
	}, {
		name:   "limit_data inside the response body: the response is the caller's, its body fails",
		fault:  toxic{typ: "limit_data", stream: "downstream", attrs: toxiclient.Attributes{"bytes": 1000}},
		method: "GET", path: "/big",
		want: want{attempts: 1, status: 200, first: httpretry.ClassSuccess, stop: httpretry.StopSuccess},
		check: func(t *testing.T, r result, _ []attemptRec, _ time.Duration) {
			if !errors.Is(r.err, io.ErrUnexpectedEOF) || len(r.body) >= 10000 {
				t.Errorf("read %d bytes, error %v: want a truncated body and io.ErrUnexpectedEOF", len(r.body), r.err)
			}
		},
	}, {
		name:   "limit_data cutting the request body: keyed POST retried, applied once",
		fault:  toxic{typ: "limit_data", stream: "upstream", attrs: toxiclient.Attributes{"bytes": 200}},
		method: "POST", path: "/pay", payload: "amount=" + strings.Repeat("9", 20000),
		want: want{attempts: 2, status: 200, first: httpretry.ClassTransient, stop: httpretry.StopSuccess, applied: 1},
	}, {
		name:   "proxy down, connection refused: unkeyed POST retried, never processed",
		fault:  toxic{typ: "down"},
		method: "POST", path: "/pay", payload: "amount=5", unkeyed: true,
		want: want{attempts: 2, status: 200, first: httpretry.ClassNotProcessed, stop: httpretry.StopSuccess, applied: 1},
		check: func(t *testing.T, r result, recs []attemptRec, _ time.Duration) {
			if !errors.Is(recs[0].err, syscall.ECONNREFUSED) {
				t.Errorf("first attempt: %v, want ECONNREFUSED", recs[0].err)
			}
		},
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			px := x.proxy(t, up.Listener.Addr().String())
			tc.fault.name = "fault"
			if err := tc.fault.apply(px); err != nil {
				t.Fatalf("applying %v: %v", tc.fault, err)
			}
			rec := &recorder{then: func(a httpretry.Attempt) {
				if a.N == 1 && a.Retry {
					if err := tc.fault.clear(px); err != nil {
						t.Errorf("clearing %v: %v", tc.fault, err)
					}
				}
			}}
			p := httpretry.Policy{
				MaxAttempts: 3, Backoff: backoff.Constant(10 * time.Millisecond),
				AttemptTimeout: tc.attemptTimeout, NewBudget: httpretry.NoBudget,
			}
			if tc.unkeyed {
				p = unkeyed(p)
			}
			rt := rec.transport(freshBase(t), p)
			id := "toxic-" + string(rune('a'+i))
			before := l.applied.Load()
			start := time.Now()
			r := mustSend(t, rt, tc.method, "http://"+px.Listen+tc.path, tc.payload,
				http.Header{"X-Request-Id": {id}})
			elapsed := time.Since(start)
			recs := rec.all()

			if len(recs) != tc.want.attempts {
				t.Fatalf("%d attempts, want %d: %+v", len(recs), tc.want.attempts, recs)
			}
			if recs[0].class != tc.want.first {
				t.Errorf("first attempt %v (%v), want %v", recs[0].class, recs[0].err, tc.want.first)
			}
			if got := recs[len(recs)-1].stop; got != tc.want.stop {
				t.Errorf("stopped: %v, want %v", got, tc.want.stop)
			}
			if tc.want.status != 0 && r.status != tc.want.status {
				t.Errorf("status %d (error %v), want %d", r.status, r.err, tc.want.status)
			}
			var re *httpretry.RetryError
			if tc.want.status == 0 && !errors.As(r.err, &re) {
				t.Errorf("error %v, want a *RetryError", r.err)
			}
			if got := int(l.applied.Load() - before); got != tc.want.applied {
				t.Errorf("applied %d times, want %d", got, tc.want.applied)
			}
			if tc.check != nil {
				tc.check(t, r, recs, elapsed)
			}
			outcome := "error"
			if r.status != 0 {
				outcome = http.StatusText(r.status)
			}
			figure(t, "Faults from toxiproxy", "%s: %d attempt(s), first %v, outcome %s, applied %d, %v",
				tc.name, len(recs), recs[0].class, outcome, tc.want.applied, elapsed.Round(time.Millisecond))
		})
	}
}
