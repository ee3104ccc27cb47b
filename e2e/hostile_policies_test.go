package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// invalid checks a case that must fail before anything is sent.
func invalid(target error) func(t *testing.T, o *hostileOutcome) {
	return func(t *testing.T, o *hostileOutcome) {
		o.requireErr(t, target, 0, httpretry.StopInvalid)
		if o.h.hitsOf(o.id) != 0 {
			t.Errorf("%d requests reached the server", o.h.hitsOf(o.id))
		}
	}
}

func withPolicy(change func(*httpretry.Policy)) httpretry.Policy {
	p := fastPolicy
	change(&p)
	return p
}

// closedPort returns the address of a loopback port that nothing listens on.
func closedPort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ln.Close()
	return ln.Addr().String()
}

func TestHostileURLsAndPolicies(t *testing.T) {
	request := func(mutate func(*http.Request)) func(context.Context, *hostileServer, string) *http.Request {
		return func(ctx context.Context, h *hostileServer, id string) *http.Request {
			req := get("/first")(ctx, h, id)
			mutate(req)
			return req
		}
	}
	runHostile(t, "Hostile URLs and policies", []hostileCase{
		// URLs and requests
		{name: "nil request", policy: fastPolicy,
			req: func(context.Context, *hostileServer, string) *http.Request { return nil },
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireErr(t, httpretry.ErrInvalidRequest, 0, httpretry.StopInvalid)
			}},
		{name: "nil URL", policy: fastPolicy,
			req: request(func(r *http.Request) { r.URL = nil }), want: invalid(httpretry.ErrInvalidRequest)},
		{name: "URL without a host", policy: fastPolicy,
			req: request(func(r *http.Request) { r.URL = &url.URL{Scheme: "http", Path: "/first"} }), want: invalid(httpretry.ErrInvalidRequest)},
		{name: "URL with scheme ftp, Transport's own Base", policy: fastPolicy, ownBase: true,
			req: request(func(r *http.Request) { r.URL.Scheme = "ftp" }), want: invalid(httpretry.ErrInvalidRequest)},
		{name: "URL with scheme ftp, an http.Transport as Base", policy: fastPolicy,
			req: request(func(r *http.Request) { r.URL.Scheme = "ftp" }),
			want: func(t *testing.T, o *hostileOutcome) {
				// With a Base of the caller's, the scheme is left to Base, and
				// net/http's "unsupported protocol scheme" error is untyped:
				// httpretry treats unrecognised errors on schemes other than
				// http and https as fatal, so it is tried once.
				var re *httpretry.RetryError
				if !errors.As(o.err, &re) || o.h.hitsOf(o.id) != 0 {
					t.Fatalf("error %v: want a *RetryError and nothing sent", o.err)
				}
				if re.Attempts > 1 {
					figure(t, knownProblems, "with a Base of the caller's, an unsupported scheme (ftp) is classified %v and tried %d times (net/http: %v); the design lists it as fatal",
						o.recs[0].class, re.Attempts, re.Err)
				}
				if re.Attempts > 1 {
					t.Errorf("an unsupported scheme was tried %d times, classified %v: want fatal at once", re.Attempts, o.recs[0].class)
				}
			}},
		{name: "header value with CR LF (request splitting)", policy: fastPolicy,
			req:  request(func(r *http.Request) { r.Header["X-Evil"] = []string{"a\r\nHost: elsewhere"} }),
			want: invalid(httpretry.ErrInvalidRequest)},
		{name: "method with a space", policy: fastPolicy,
			req: request(func(r *http.Request) { r.Method = "GE T" }), want: invalid(httpretry.ErrInvalidRequest)},
		{name: "port where nothing listens: refused, retried as not processed, then the error", policy: fastPolicy,
			req: request(func(r *http.Request) { r.URL.Host = closedPort() }),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireErr(t, syscall.ECONNREFUSED, 3, httpretry.StopAttempts)
				if o.recs[0].class != httpretry.ClassNotProcessed {
					t.Errorf("class %v, want not-processed", o.recs[0].class)
				}
			}},
		// Policies
		{name: "the zero Policy: the defaults (4 attempts, 100 ms full-jitter backoff, default budget)",
			req:  get("/first"),
			want: func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 200, 2, httpretry.StopSuccess) }},
		{name: "MaxAttempts 1: no retry", policy: withPolicy(func(p *httpretry.Policy) { p.MaxAttempts = 1 }),
			req:  get("/first"),
			want: func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 503, 1, httpretry.StopAttempts) }},
		{name: "MaxAttempts -1", policy: withPolicy(func(p *httpretry.Policy) { p.MaxAttempts = -1 }),
			req: get("/first"), want: invalid(httpretry.ErrInvalidPolicy)},
		{name: "AttemptTimeout -1ns: no per-attempt limit, as a negative net.Dialer.KeepAlive means none",
			policy: withPolicy(func(p *httpretry.Policy) { p.AttemptTimeout = -1 }),
			req:    get("/first"),
			want:   func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 200, 2, httpretry.StopSuccess) }},
		{name: "MaxRetryAfter -1ns", policy: withPolicy(func(p *httpretry.Policy) { p.MaxRetryAfter = -1 }),
			req: get("/first"), want: invalid(httpretry.ErrInvalidPolicy)},
		{name: "Backoff with a negative base (Validate fails)",
			policy: withPolicy(func(p *httpretry.Policy) { p.Backoff = backoff.Exponential{Base: -time.Second} }),
			req:    get("/first"), want: invalid(httpretry.ErrInvalidPolicy)},
		{name: "Keys.New returning an empty key",
			policy: withPolicy(func(p *httpretry.Policy) { p.Keys.New = func() string { return "" } }),
			req:    upload("/sink", func() io.Reader { return strings.NewReader("x") }, 1), want: invalid(httpretry.ErrInvalidPolicy)},
		{name: "Keys.New returning a key with CR LF",
			policy: withPolicy(func(p *httpretry.Policy) { p.Keys.New = func() string { return "k\r\nX-Evil: 1" } }),
			req:    upload("/sink", func() io.Reader { return strings.NewReader("x") }, 1), want: invalid(httpretry.ErrInvalidPolicy)},
		{name: "MaxAttempts 2^30 against a server that always fails: the default budget stops it",
			policy: httpretry.Policy{MaxAttempts: 1 << 30, Backoff: backoff.Constant(0)}, req: get("/always"),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireStatus(t, 503, len(o.recs), httpretry.StopBudget)
				if len(o.recs) > 200 {
					t.Errorf("%d attempts: the budget did not bound them", len(o.recs))
				}
			}},
		{name: "MaxAttempts 2^30, no budget, caller's deadline 500ms: the deadline stops it",
			policy:  httpretry.Policy{MaxAttempts: 1 << 30, Backoff: backoff.Constant(2 * time.Millisecond), NewBudget: httpretry.NoBudget},
			timeout: 500 * time.Millisecond, req: get("/always"),
			want: func(t *testing.T, o *hostileOutcome) {
				if o.elapsed > time.Second {
					t.Errorf("took %v: want the caller's 500ms deadline to end it", o.elapsed)
				}
			}},
		{name: "Backoff of 1000 hours, caller's deadline 2s: no wait is started",
			policy:  withPolicy(func(p *httpretry.Policy) { p.Backoff = backoff.Constant(1000 * time.Hour) }),
			timeout: 2 * time.Second, req: get("/always"),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireStatus(t, 503, 1, httpretry.StopDeadline)
				if o.elapsed > 500*time.Millisecond {
					t.Errorf("took %v: a wait past the deadline was started", o.elapsed)
				}
			}},
		{name: "AttemptTimeout 1ns: every attempt times out",
			policy: withAttemptTimeout(fastPolicy, time.Nanosecond), req: get("/first"),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireErr(t, httpretry.ErrAttemptTimeout, 3, httpretry.StopAttempts)
			}},
		{name: "MaxRetryAfter 1ns: any server-requested wait ends retrying",
			policy: withPolicy(func(p *httpretry.Policy) { p.MaxRetryAfter = time.Nanosecond }), req: get("/always?ra=1"),
			want: func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 503, 1, httpretry.StopRetryAfter) }},
		{name: "MaxReplayBytes -1: a POST without GetBody is sent once",
			policy: withPolicy(func(p *httpretry.Policy) { p.MaxReplayBytes = -1 }),
			req:    upload("/first", func() io.Reader { return strings.NewReader("x") }, 1),
			want:   func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 503, 1, httpretry.StopNotReplayable) }},
	})
}
