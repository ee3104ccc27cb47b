package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
)

var errBoom = errors.New("the body's reader broke")

// patternReader yields n bytes without ever holding them: each Read copies
// from one 64 KiB block. After fail bytes (if fail > 0) it returns errBoom.
type patternReader struct{ left, fail int64 }

var patternBlock = bytes.Repeat([]byte("0123456789abcdef"), 4096)

func (r *patternReader) Read(p []byte) (int, error) {
	if r.fail > 0 && r.left <= r.fail {
		return 0, errBoom
	}
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := copy(p, patternBlock)
	n = int(min(int64(n), r.left))
	r.left -= int64(n)
	return n, nil
}

// upload builds a POST of body to path, with the given Content-Length and
// no GetBody, so that httpretry must buffer it or stream it once.
func upload(path string, body func() io.Reader, contentLength int64) func(context.Context, *hostileServer, string) *http.Request {
	return func(ctx context.Context, h *hostileServer, _ string) *http.Request {
		req, err := http.NewRequestWithContext(ctx, "POST", h.url+path, io.NopCloser(body()))
		if err != nil {
			panic(err)
		}
		req.ContentLength = contentLength
		return req
	}
}

// heapPeak samples the bytes in live and unswept heap objects every
// millisecond until stop is called, which returns the highest sample above
// the level before start.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() uint64 {
		once.Do(func() { close(done); <-finished })
		return peak - min(peak, base)
	}
}

const gib = 1 << 30

func TestHostileBodies(t *testing.T) {
	var peak func() uint64
	gigabyte := func(status string) func(context.Context, *hostileServer, string) *http.Request {
		return func(ctx context.Context, h *hostileServer, id string) *http.Request {
			peak = heapPeak()
			return upload("/sink?status="+status, func() io.Reader { return &patternReader{left: gib} }, -1)(ctx, h, id)
		}
	}
	checkGigabyte := func(status int, stop httpretry.StopReason) func(t *testing.T, o *hostileOutcome) {
		return func(t *testing.T, o *hostileOutcome) {
			p := peak()
			o.requireStatus(t, status, 1, stop)
			if n := o.h.count(o.h.read, o.id); n != gib {
				t.Errorf("the server read %d bytes, want 1 GiB", n)
			}
			if p > 64<<20 {
				t.Errorf("heap peaked %d MiB above its level before: the body was held in memory", p>>20)
			}
			figure(t, "Hostile bodies", "1 GiB streamed past the 1 MiB replay limit, answered %d: heap peak %.1f MiB above the level before, %d attempt(s), %v (%.0f MiB/s)",
				status, float64(p)/(1<<20), len(o.recs), o.elapsed.Round(time.Millisecond), gib/(1<<20)/o.elapsed.Seconds())
		}
	}
	runHostile(t, "Hostile bodies", []hostileCase{
		// A body is sent as it is read, never read ahead (a stream must
		// work), so a body that breaks is found out by the attempt that
		// sends it: its error, not the connection's, ends the call.
		{name: "body that fails at once: the body's error, not retried", policy: fastPolicy,
			req: upload("/sink", func() io.Reader { return &patternReader{left: 100, fail: 100} }, 100),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireErr(t, httpretry.ErrRequestBody, 1, httpretry.StopFatal)
				if !errors.Is(o.err, errBoom) || o.h.hitsOf(o.id) > 1 {
					t.Errorf("error %v, %d requests at the server: want errBoom, and at most the one whose body broke", o.err, o.h.hitsOf(o.id))
				}
			}},
		{name: "body that fails after 2 MiB, past the replay limit: sent once, not retried", policy: fastPolicy,
			req: upload("/sink", func() io.Reader { return &patternReader{left: 4 << 20, fail: 2 << 20} }, -1),
			want: func(t *testing.T, o *hostileOutcome) {
				o.requireErr(t, errBoom, 1, httpretry.StopFatal)
				if !errors.Is(o.err, httpretry.ErrRequestBody) {
					t.Errorf("error %v: want ErrRequestBody", o.err)
				}
			}},
		{name: "GetBody that fails before the retry: the 503 returned", policy: fastPolicy,
			req: func(ctx context.Context, h *hostileServer, _ string) *http.Request {
				req, _ := http.NewRequestWithContext(ctx, "PUT", h.url+"/first", strings.NewReader("payload"))
				req.GetBody = func() (io.ReadCloser, error) { return nil, errBoom }
				return req
			},
			want: func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 503, 1, httpretry.StopNotReplayable) }},
		{name: "Content-Length 100 on a body of 10 bytes", policy: fastPolicy,
			req: upload("/sink", func() io.Reader { return strings.NewReader("ten bytes!") }, 100),
			want: func(t *testing.T, o *hostileOutcome) {
				if o.err == nil || o.h.hitsOf(o.id) > len(o.recs) {
					t.Errorf("response %v: want an error", o.resp != nil)
				}
				untypedRetried(t, o, "a Content-Length that does not match the body")
			}},
		{name: "Content-Length 5 on a body of 10 bytes", policy: fastPolicy,
			req: upload("/sink", func() io.Reader { return strings.NewReader("ten bytes!") }, 5),
			want: func(t *testing.T, o *hostileOutcome) {
				if o.err == nil && o.h.count(o.h.read, o.id) > 5 {
					t.Errorf("the server read %d bytes of a request that declared 5", o.h.count(o.h.read, o.id))
				}
				untypedRetried(t, o, "a Content-Length that does not match the body")
			}},
		{name: "no body with Content-Length 10", policy: fastPolicy,
			req: func(ctx context.Context, h *hostileServer, _ string) *http.Request {
				req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/sink", nil)
				req.ContentLength = 10
				return req
			},
			want: func(t *testing.T, o *hostileOutcome) {
				if o.err == nil {
					t.Errorf("status %d: want an error", o.resp.StatusCode)
				}
				untypedRetried(t, o, "a nil body with a Content-Length")
			}},
		{name: "1 GiB streamed, answered 200", policy: fastPolicy, timeout: 2 * time.Minute,
			req: gigabyte("200"), want: checkGigabyte(200, httpretry.StopSuccess)},
		{name: "1 GiB streamed, answered 503: returned, not retried", policy: fastPolicy, timeout: 2 * time.Minute,
			req: gigabyte("503"), want: checkGigabyte(503, httpretry.StopNotReplayable)},
	})
}

// untypedRetried reports a request that can never be sent (net/http refuses
// it with an untyped error before writing it) but that httpretry classified
// as transient and tried again: attempts wasted, nothing worse.
func untypedRetried(t *testing.T, o *hostileOutcome, what string) {
	var re *httpretry.RetryError
	if !errors.As(o.err, &re) || re.Attempts <= 1 {
		return
	}
	figure(t, knownProblems, "a request with %s cannot be sent (net/http: %v) but is retried as transient: %d attempts, %d reached the server",
		what, re.Err, re.Attempts, o.h.hitsOf(o.id))
	{ // a regression of a fixed bug
		t.Errorf("%d attempts of a request net/http refuses to send: want it refused at once", re.Attempts)
	}
}
