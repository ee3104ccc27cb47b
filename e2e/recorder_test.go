package e2e

import (
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seedhq/httpretry"
)

// attemptRec is what Transport.OnAttempt reported about one attempt.
type attemptRec struct {
	method, key, id string // the request's method, Idempotency-Key, X-Request-Id
	n               int
	status          int // 0 when err is set
	err             error
	class           httpretry.Class
	retry           bool
	delay           time.Duration
	source          string
	stop            httpretry.StopReason
}

// recorder keeps every attempt a Transport reports. then, if set, runs
// after each attempt is recorded, on the RoundTrip goroutine, before any
// wait: tests use it to end a fault between two attempts.
type recorder struct {
	then func(httpretry.Attempt)

	mu   sync.Mutex
	recs []attemptRec
}

func (r *recorder) observe(a httpretry.Attempt) {
	rec := attemptRec{
		method: a.Request.Method, key: a.Request.Header.Get("Idempotency-Key"),
		id: a.Request.Header.Get("X-Request-Id"),
		n:  a.N, err: a.Err, class: a.Class, retry: a.Retry, delay: a.Delay,
		source: a.DelaySource.String(), stop: a.Stop,
	}
	if a.Response != nil {
		rec.status = a.Response.StatusCode
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	if r.then != nil {
		r.then(a)
	}
}

func (r *recorder) all() []attemptRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attemptRec(nil), r.recs...)
}

// last returns the last attempt recorded.
func (r *recorder) last() attemptRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		return attemptRec{}
	}
	return r.recs[len(r.recs)-1]
}

// transport returns a Transport over base that records into r.
func (r *recorder) transport(base http.RoundTripper, p httpretry.Policy) *httpretry.Transport {
	return &httpretry.Transport{Base: base, Policy: p, OnAttempt: r.observe}
}

// unkeyed is p with idempotency keys turned off: its POSTs go out without
// a key, and may be retried only when provably not processed.
func unkeyed(p httpretry.Policy) httpretry.Policy {
	p.Keys.Disabled = true
	return p
}

// freshBase returns a pooled HTTP/1.1 transport of its own, so a test's
// first request opens a new connection; it is closed when the test ends.
func freshBase(t interface{ Cleanup(func()) }) *http.Transport {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// hiddenRetries is a Base that counts the retries net/http makes inside one
// call of RoundTrip (HTTP/2 after REFUSED_STREAM or GOAWAY, HTTP/1 on a
// reused connection that failed before answering): every connection it is
// handed beyond the first in one call, as httptrace's GotConn reports.
type hiddenRetries struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (h *hiddenRetries) RoundTrip(req *http.Request) (*http.Response, error) {
	var got atomic.Int64
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { got.Add(1) },
	})
	resp, err := h.base.RoundTrip(req.WithContext(ctx))
	if n := got.Load(); n > 1 {
		h.n.Add(n - 1)
	}
	return resp, err
}

func asRetryError(err error, target **httpretry.RetryError) bool { return errors.As(err, target) }
