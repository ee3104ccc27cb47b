package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// hostileServer misbehaves on request. Paths that say "first" misbehave on
// the first request of each X-Request-Id and answer 200 "ok" after that.
//
//	/first?ra=V&rl=V&ralen=N&big=N  503 with Retry-After V (repeatable),
//	                                RateLimit V, a Retry-After of N digits,
//	                                an X-Big header of N bytes
//	/always?ra=V                    503 with Retry-After V, every time
//	/sink?status=N                  reads the whole body, counts it, answers N
//	/huge                           first: 503 with a 100 MiB body
//	/endless                        first: 503 with a chunked body that never ends
//	/trickle                        first: 503 with a body of 1 byte per 50 ms
//	/liecl                          first: 503 promising 1000 bytes, sending 5
//	/garbage                        no HTTP at all, every time
//
// Every writing loop stops at a write error, 30 s or 200 MiB.
type hostileServer struct {
	url string

	mu      sync.Mutex
	hits    map[string]int   // requests by X-Request-Id
	written map[string]int64 // body bytes written by X-Request-Id, first request
	read    map[string]int64 // body bytes read by X-Request-Id
}

func startHostile(t testing.TB) *hostileServer {
	h := &hostileServer{hits: map[string]int{}, written: map[string]int64{}, read: map[string]int64{}}
	srv := httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *hostileServer) serve(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	h.mu.Lock()
	h.hits[id]++
	first := h.hits[id] == 1
	h.mu.Unlock()
	q := r.URL.Query()
	header := func() {
		for _, v := range q["ra"] {
			w.Header().Add("Retry-After", v)
		}
		for _, v := range q["rl"] {
			w.Header().Add("RateLimit", v)
		}
		if n, _ := strconv.Atoi(q.Get("ralen")); n > 0 {
			w.Header().Set("Retry-After", strings.Repeat("9", n))
		}
		if n, _ := strconv.Atoi(q.Get("big")); n > 0 {
			w.Header().Set("X-Big", strings.Repeat("b", n))
		}
	}
	switch r.URL.Path {
	case "/always":
		header()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	case "/sink":
		n, _ := io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.read[id] += n
		h.mu.Unlock()
		status, _ := strconv.Atoi(q.Get("status"))
		w.WriteHeader(max(status, 200))
		return
	case "/garbage":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			io.WriteString(conn, "THIS IS NOT HTTP\r\n\r\n")
			conn.Close()
		}
		return
	}
	if !first {
		io.WriteString(w, "ok")
		return
	}
	switch r.URL.Path {
	case "/first":
		header()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	case "/huge":
		w.Header().Set("Content-Length", strconv.Itoa(100<<20))
		w.WriteHeader(http.StatusServiceUnavailable)
		h.stream(w, id, 32<<10, 0)
	case "/endless":
		w.WriteHeader(http.StatusServiceUnavailable)
		h.stream(w, id, 32<<10, 0)
	case "/trickle":
		w.WriteHeader(http.StatusServiceUnavailable)
		h.stream(w, id, 1, 50*time.Millisecond)
	case "/liecl":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\nshort")
			conn.Close()
		}
	}
}

// stream writes chunks of size bytes, every pause, until a write fails,
// 30 s pass or 200 MiB are written, and counts what it wrote.
func (h *hostileServer) stream(w http.ResponseWriter, id string, size int, pause time.Duration) {
	rc := http.NewResponseController(w)
	chunk := []byte(strings.Repeat("x", size))
	var n int64
	defer func() {
		h.mu.Lock()
		h.written[id] += n
		h.mu.Unlock()
	}()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && n < 200<<20; {
		m, err := w.Write(chunk)
		n += int64(m)
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

func (h *hostileServer) count(m map[string]int64, id string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return m[id]
}

func (h *hostileServer) hitsOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[id]
}

// hostileCase is one row of the hostile-input table. req builds the request
// (nil is a valid hostile request) against the server; want checks the
// outcome, after the runner has checked the RoundTripper contract.
type hostileCase struct {
	name    string
	policy  httpretry.Policy
	timeout time.Duration // the caller's context; 0 means 10 s
	ownBase bool          // leave Transport.Base nil: the Transport's own pooled transport
	req     func(ctx context.Context, h *hostileServer, id string) *http.Request
	want    func(t *testing.T, o *hostileOutcome)
}

// hostileOutcome is what one case produced.
type hostileOutcome struct {
	id      string
	h       *hostileServer
	resp    *http.Response // body already read (into body) and closed
	body    string
	err     error
	recs    []attemptRec
	call    httpretry.StopReason // why the call stopped, as OnCall said
	elapsed time.Duration
}

// fastPolicy is the base of most cases: few attempts, short waits.
var fastPolicy = httpretry.Policy{MaxAttempts: 3, Backoff: backoff.Constant(5 * time.Millisecond), NewBudget: httpretry.NoBudget}

// runHostile runs a table, each case against a fresh Transport, and checks
// for every case: exactly one of response and error; the request body
// closed; the call over within the caller's deadline; and, after the whole
// table, goroutines and open files back to their baseline.
func runHostile(t *testing.T, section string, cases []hostileCase) {
	base := currentUsage(t)
	t.Run("cases", func(t *testing.T) {
		h := startHostile(t)
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				id := t.Name() + "#" + strconv.Itoa(i)
				timeout := cmpOr(tc.timeout, 10*time.Second)
				ctx, cancel := context.WithTimeout(t.Context(), timeout)
				defer cancel()
				req := tc.req(ctx, h, id)
				var cc *trackClose
				if req != nil && req.Body != nil {
					cc = &trackClose{ReadCloser: req.Body}
					req.Body = cc
				}
				if req != nil && req.Header != nil {
					req.Header.Set("X-Request-Id", id)
				}
				rec := &recorder{}
				rt := rec.transport(freshBase(t), tc.policy)
				var call httpretry.StopReason
				rt.OnCall = func(c httpretry.Call) { call = c.Stop }
				if tc.ownBase {
					rt.Base = nil
					defer rt.CloseIdleConnections()
				}
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				o := &hostileOutcome{id: id, h: h, resp: resp, err: err, recs: rec.all(), call: call}
				switch {
				case resp != nil && err != nil:
					t.Fatalf("both a response and an error: %v", err)
				case resp == nil && err == nil:
					t.Fatal("neither a response nor an error")
				case cc != nil && !eventually(cc.closed.Load):
					t.Error("the request body was not closed") // see send: net/http may close it late
				}
				if resp != nil {
					b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
					resp.Body.Close()
					o.body = string(b)
					if rerr != nil {
						o.body += " [read error: " + rerr.Error() + "]"
					}
				}
				o.elapsed = time.Since(start)
				if o.elapsed > timeout+time.Second {
					t.Errorf("took %v, past the caller's %v deadline", o.elapsed, timeout)
				}
				tc.want(t, o)
				figure(t, section, "%s → %s", tc.name, o.summary())
			})
		}
	})
	after := requireSettled(t, base)
	figure(t, section, "after the table: %d goroutines (baseline %d), %d open files (baseline %d)",
		after.goroutines, base.goroutines, after.fds, base.fds)
}

func (o *hostileOutcome) summary() string {
	out := ""
	if o.resp != nil {
		out = "response " + strconv.Itoa(o.resp.StatusCode)
	} else {
		out = "error: " + o.err.Error()
	}
	stop := o.call.String()
	return fmt.Sprintf("%s; %d attempt(s), %d reached the server, stop: %s, %v",
		out, len(o.recs), o.h.hitsOf(o.id), stop, o.elapsed.Round(time.Millisecond))
}

// requireErr checks that the call failed with a *RetryError whose chain
// holds target, after the given number of attempts and for reason stop.
func (o *hostileOutcome) requireErr(t *testing.T, target error, attempts int, stop httpretry.StopReason) {
	t.Helper()
	var re *httpretry.RetryError
	if !errors.As(o.err, &re) {
		t.Fatalf("error %v, response %v: want a *RetryError", o.err, o.resp != nil)
	}
	if target != nil && !errors.Is(o.err, target) {
		t.Errorf("error %v: want one that errors.Is %v", o.err, target)
	}
	if re.Attempts != attempts || re.Stop != stop {
		t.Errorf("%d attempts, reason %v: want %d, %v", re.Attempts, re.Stop, attempts, stop)
	}
}

// requireStatus checks the final status, the attempts and why the call
// stopped: on the last attempt, or, for a retry that was decided and then
// not sent (its body could not be had), on the call.
func (o *hostileOutcome) requireStatus(t *testing.T, status, attempts int, stop httpretry.StopReason) {
	t.Helper()
	if o.resp == nil || o.resp.StatusCode != status {
		t.Fatalf("response %v, error %v: want status %d", o.resp != nil, o.err, status)
	}
	if len(o.recs) == 0 {
		t.Fatalf("no attempt recorded: want %d", attempts)
	}
	last := o.recs[len(o.recs)-1].stop
	if len(o.recs) != attempts || o.call != stop || last != stop && last != httpretry.StopNone {
		t.Errorf("%d attempts, stop %v (the call's: %v): want %d, %v", len(o.recs), last, o.call, attempts, stop)
	}
}

type trackClose struct {
	io.ReadCloser
	closed atomic.Bool
}

func (c *trackClose) Close() error {
	c.closed.Store(true)
	return c.ReadCloser.Close()
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// get builds a GET of path on the hostile server.
func get(path string) func(context.Context, *hostileServer, string) *http.Request {
	return func(ctx context.Context, h *hostileServer, _ string) *http.Request {
		req, err := http.NewRequestWithContext(ctx, "GET", h.url+path, nil)
		if err != nil {
			panic(err)
		}
		return req
	}
}
