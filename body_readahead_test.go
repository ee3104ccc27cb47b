package httpretry_test

// Issue 22, part 1: Policy.ReadBodyBytes reads a small response body
// before RoundTrip returns, as part of its attempt.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// ledger is a payments API that applies each charge once per idempotency
// key, and cuts the answers that cut chooses half-way through the body, as
// a connection that dies mid-body does.
type ledger struct {
	cut     func(answer int) bool // answers count from 1
	mu      sync.Mutex
	applied int            // charges applied
	byKey   map[string]int // charge number per key
	answers int            // answers begun
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	l.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	id, seen := l.byKey[key]
	if !seen || key == "" {
		l.applied++
		id = l.applied
		if key != "" {
			l.byKey[key] = id
		}
	}
	l.answers++
	cut := l.cut(l.answers)
	l.mu.Unlock()
	body := fmt.Sprintf(`{"id":"ch_%d","status":"succeeded"}`, id)
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if cut {
		io.WriteString(w, body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection dies mid-body
	}
	io.WriteString(w, body)
}

// newLedger returns a ledger that cuts its first answer.
func newLedger() *ledger {
	return &ledger{cut: func(n int) bool { return n == 1 }, byKey: map[string]int{}}
}

// counts returns the charges applied and the answers begun.
func (l *ledger) counts() (applied, answers int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied, l.answers
}

func postCharge(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount":1999}`))
	require.NoError(t, err)
	return req
}

// A keyed POST whose answer is lost mid-body is sent again with its key,
// and the server, which deduplicates by key, applies it once.
func TestReadBodyKeyedPostRetriedAppliedOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		upstream := &httpretrytest.HandlerTransport{Handler: l}
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record, Policy: httpretry.Policy{ReadBodyBytes: 4096}}
		resp, err := tr.RoundTrip(postCharge(t, t.Context(), site))
		require.NoError(t, err)
		assert.Equal(t, `{"id":"ch_1","status":"succeeded"}`, readAll(t, resp.Body))
		require.NoError(t, resp.Body.Close())

		applied, _ := l.counts()
		assert.Equal(t, 1, applied, "applied once")
		reqs := upstream.Requests()
		httpretrytest.CheckAttempts(t, reqs, 2)
		httpretrytest.CheckSameKey(t, reqs)
		httpretrytest.CheckSameBody(t, reqs)
		httpretrytest.CheckBodiesClosed(t, reqs)
		attempts := log.Attempts()
		require.Len(t, attempts, 2)
		assert.ErrorIs(t, attempts[0].Err, io.ErrUnexpectedEOF)
		assert.Equal(t, httpretry.ClassTransient, attempts[0].Class)
		assert.True(t, attempts[0].Retry)
	})
}

// An unkeyed POST whose body dies was processed by the server: it is not
// sent again, and the caller gets the error, not a response it cannot read.
func TestReadBodyUnkeyedPostIsNotResent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		upstream := &httpretrytest.HandlerTransport{Handler: l}
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{
			ReadBodyBytes: 4096, Keys: httpretry.KeyPolicy{Disabled: true}}}
		resp, err := tr.RoundTrip(postCharge(t, t.Context(), site))
		require.Nil(t, resp)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopNotReplayable, re.Stop)
		assert.Equal(t, 1, re.Attempts)
		applied, _ := l.counts()
		assert.Equal(t, 1, applied)
		reqs := upstream.Requests()
		httpretrytest.CheckAttempts(t, reqs, 1)
		httpretrytest.CheckBodiesClosed(t, reqs)
	})
}

// Whatever broke the body, the request was processed: an error that
// would say "never sent" before a response says "transient" after one,
// so an unkeyed POST is still not resent; a keyed one is.
func TestReadBodyFailureIsNeverNotProcessed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"dial refused", httpretrytest.DialRefused()},
		{"connection reset", httpretrytest.ConnReset()},
		{"unknown error", errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				for _, keyed := range []bool{false, true} {
					upstream := httpretrytest.NewScript(
						httpretrytest.Respond(200, `{"id":"ch_1"}`).FailAfter(4, tc.err),
						httpretrytest.Respond(200, `{"id":"ch_1"}`))
					var log httpretrytest.AttemptLog
					tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record, Policy: httpretry.Policy{
						ReadBodyBytes: 64, Keys: httpretry.KeyPolicy{Disabled: !keyed}}}
					resp, err := tr.RoundTrip(postCharge(t, t.Context(), site))
					a := log.Attempts()[0]
					assert.Equal(t, httpretry.ClassTransient, a.Class)
					assert.ErrorIs(t, a.Err, tc.err)
					if keyed {
						require.NoError(t, err)
						assert.Equal(t, `{"id":"ch_1"}`, readAll(t, resp.Body))
						resp.Body.Close()
						httpretrytest.CheckAttempts(t, upstream.Requests(), 2)
						httpretrytest.CheckSameKey(t, upstream.Requests())
					} else {
						require.ErrorIs(t, err, tc.err)
						httpretrytest.CheckAttempts(t, upstream.Requests(), 1)
					}
					httpretrytest.CheckBodiesClosed(t, upstream.Requests())
				}
			})
		})
	}
}

// status is the JSON body of the API the classifier tests talk to.
type status struct {
	Status string `json:"status"`
	Error  string `json:"error"`
}

// classifyByBody retries a 200 whose body says "try again" and stops on a
// 503 whose body names a permanent error, reading resp.Body.
func classifyByBody(seen *[]string) func(*http.Request, *http.Response, error) httpretry.Class {
	return func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
		if resp == nil {
			return httpretry.ClassDefault
		}
		b, err := io.ReadAll(resp.Body)
		*seen = append(*seen, string(b))
		var s status
		if err != nil || json.Unmarshal(b, &s) != nil {
			return httpretry.ClassDefault
		}
		switch {
		case resp.StatusCode == http.StatusOK && s.Status == "try again":
			return httpretry.ClassTransient
		case resp.StatusCode == http.StatusServiceUnavailable && s.Error == "account_closed":
			return httpretry.ClassFatal
		}
		return httpretry.ClassDefault
	}
}

func TestReadBodyClassifyReadsTheBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		first    httpretrytest.Outcome
		status   int
		body     string   // what the caller reads
		seen     []string // what the classifier read, attempt by attempt
		attempts int
	}{
		{"a 200 that says try again is retried", httpretrytest.Respond(200, `{"status":"try again"}`),
			200, `{"status":"done"}`, []string{`{"status":"try again"}`, `{"status":"done"}`}, 2},
		{"a 503 that names a permanent error is returned", httpretrytest.Respond(503, `{"error":"account_closed"}`),
			503, `{"error":"account_closed"}`, []string{`{"error":"account_closed"}`}, 1},
		{"a 503 that names none is retried as usual", httpretrytest.Respond(503, `{"error":"overloaded"}`),
			200, `{"status":"done"}`, []string{`{"error":"overloaded"}`, `{"status":"done"}`}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				upstream := httpretrytest.NewScript(tc.first, httpretrytest.Respond(200, `{"status":"done"}`))
				var seen []string
				tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{ReadBodyBytes: 1024, Classify: classifyByBody(&seen)}}
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, tc.body, readAll(t, resp.Body), "the caller reads the whole body the classifier read")
				resp.Body.Close()
				assert.Equal(t, tc.seen, seen)
				httpretrytest.CheckAttempts(t, upstream.Requests(), tc.attempts)
				httpretrytest.CheckBodiesClosed(t, upstream.Requests())
			})
		})
	}
}

// A classifier reads at most ReadBodyBytes of a larger body, followed by
// an error; the caller still reads it whole, from its first byte, and
// closing it closes the original.
func TestReadBodyClassifyIsBounded(t *testing.T) {
	t.Parallel()
	const limit = 100
	payload := bytes.Repeat([]byte("0123456789"), 1000)
	for _, tc := range []struct {
		name          string
		contentLength int64
		sees          int // bytes the classifier can read
	}{
		{"Content-Length above the limit", int64(len(payload)), 0},
		{"Content-Length -1", -1, limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				upstream := streamOf(bytes.NewReader(payload), tc.contentLength)
				var got []byte
				var readErr error
				tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{ReadBodyBytes: limit,
					Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
						got, readErr = io.ReadAll(resp.Body)
						return httpretry.ClassDefault
					}}}
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				assert.Len(t, got, tc.sees)
				assert.LessOrEqual(t, len(got), limit)
				assert.Equal(t, payload[:len(got)], got)
				require.Error(t, readErr, "the classifier is told the body goes on")
				assert.NotErrorIs(t, readErr, io.EOF)
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(payload, b), "the caller reads the whole body")
				require.NoError(t, resp.Body.Close())
				httpretrytest.CheckBodiesClosed(t, upstream.Requests())
			})
		})
	}
}

// streamOf is an upstream that answers once, a 200 whose body is body,
// of length contentLength (-1: unknown).
func streamOf(body io.Reader, contentLength int64) *httpretrytest.Script {
	return httpretrytest.NewScript(httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req,
			ContentLength: contentLength, Body: io.NopCloser(body)}, nil
	}))
}

// A body larger than the limit is handed over as a stream, byte for byte,
// whether its length is known or not, and its Close closes the original.
func TestReadBodyLargeBodyStreamsUntouched(t *testing.T) {
	t.Parallel()
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i*7 + i/251)
	}
	for _, tc := range []struct {
		name          string
		contentLength int64
		readAhead     int64 // bytes the Transport reads before returning
	}{
		{"Content-Length above the limit", int64(len(payload)), 0},
		{"Content-Length -1", -1, 4097},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				upstream := streamOf(bytes.NewReader(payload), tc.contentLength)
				tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{ReadBodyBytes: 4096}}
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				body := upstream.Requests()[0].ResponseBody
				assert.Equal(t, tc.readAhead, body.BytesRead(), "read ahead before RoundTrip returned")
				assert.Equal(t, tc.contentLength, resp.ContentLength)
				var got bytes.Buffer
				_, err = io.Copy(&got, resp.Body)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(payload, got.Bytes()), "bytes identical")
				assert.Zero(t, body.Closes(), "open until the caller closes it")
				require.NoError(t, resp.Body.Close())
				assert.Equal(t, 1, body.Closes())
			})
		})
	}
}

// Reading ahead holds at most the limit (and one byte) of a body of
// unknown length, however long it is; the rest streams through.
func TestReadBodyMemoryIsBounded(t *testing.T) {
	const limit, size = 1 << 20, 64 << 20
	upstream := streamOf(io.LimitReader(zeros{}, size), -1)
	tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{ReadBodyBytes: limit}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := tr.RoundTrip(get(t, t.Context()))
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	assert.EqualValues(t, size, n)
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(3*limit), "allocated %d bytes for a %d-byte body", allocated, size)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// With an attempt timeout, the read counts: a body too slow for it is a
// timed-out attempt, retried, and its body closed.
func TestReadBodySlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Respond(200, "a slow body").Slow(1, time.Second),
			httpretrytest.Respond(200, "fast"))
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record, Policy: httpretry.Policy{
			ReadBodyBytes: 1024, AttemptTimeout: 3 * time.Second}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "fast", readAll(t, resp.Body))
		resp.Body.Close()
		attempts := log.Attempts()
		require.Len(t, attempts, 2)
		assert.ErrorIs(t, attempts[0].Err, httpretry.ErrAttemptTimeout)
		assert.Equal(t, 3*time.Second, attempts[0].Duration, "the attempt lasted its timeout")
		httpretrytest.CheckBodiesClosed(t, upstream.Requests())
	})
}

// A hedged round races whole answers: an attempt whose header came first
// but whose body is slow loses to a hedge that is read first.
func TestReadBodyHedgeRacesTheBody(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Respond(200, "slow").Slow(1, 10*time.Second),
			httpretrytest.Respond(200, "hedge").After(time.Second))
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record, Policy: httpretry.Policy{
			ReadBodyBytes: 1024, Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "hedge", readAll(t, resp.Body))
		resp.Body.Close()
		assert.Equal(t, 2*time.Second, time.Since(start))
		attempts := log.Attempts()
		require.Len(t, attempts, 2)
		assert.True(t, attempts[0].Lost, "the slow body lost: %+v", attempts[0])
		assert.True(t, attempts[1].Hedge, "the hedge won: %+v", attempts[1])
		synctest.Wait() // the loser is reaped in the background
		httpretrytest.CheckBodiesClosed(t, upstream.Requests())
	})
}

// The limit is set per host and per request, and inherits as any field:
// a negative value or zero in WithPolicy turns it off.
func TestReadBodyPerHostAndPerRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretry.Transport{Hosts: map[string]httpretry.Policy{"api.example.com": {ReadBodyBytes: 1024}}}
		readAhead := func(ctx context.Context, url string) bool {
			upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "ok"))
			tr := &httpretry.Transport{Base: upstream, Policy: tr.Policy, Hosts: tr.Hosts}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			n := upstream.Requests()[0].ResponseBody.BytesRead()
			assert.Equal(t, "ok", readAll(t, resp.Body))
			resp.Body.Close()
			return n == 2
		}
		ctx := t.Context()
		assert.True(t, readAhead(ctx, site), "the host's entry")
		assert.False(t, readAhead(ctx, "https://other.example.com/"), "Transport.Policy")
		assert.True(t, readAhead(httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.ReadBodyBytes = 10 }), "https://other.example.com/"))
		assert.False(t, readAhead(httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.ReadBodyBytes = -1 }), site))
		assert.False(t, readAhead(httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.ReadBodyBytes = 0 }), site))
		assert.True(t, readAhead(httpretry.WithoutRetries(ctx), site), "retries off, reading kept")
		tr.Hosts["api.example.com/v1/things"] = httpretry.Policy{ReadBodyBytes: -1}
		assert.False(t, readAhead(ctx, site), "a path key turns it off")
	})
}

// panickyBody panics in Read.
type panickyBody struct{ closed atomic.Int32 }

func (b *panickyBody) Read([]byte) (int, error) { panic("body read panics") }
func (b *panickyBody) Close() error             { b.closed.Add(1); return nil }

// failingCloseBody fails to close.
type failingCloseBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *failingCloseBody) Close() error { b.closed.Add(1); return errors.New("close failed") }

// Everything an attempt acquires is given back on every path of the read:
// a body whose Read panics (on the caller's goroutine and on a hedge's),
// one whose Close fails, a nil body, no Content-Length, HEAD, 204 and 304.
// A concurrency limit of one shows the slot is free again.
func TestReadBodyReleasesOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		method string
		hedge  bool
		resp   func(req *http.Request) (*http.Response, io.Closer)
		check  func(t *testing.T, resp *http.Response, err error, body io.Closer)
	}{
		{name: "Read panics", resp: func(req *http.Request) (*http.Response, io.Closer) {
			b := &panickyBody{}
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: -1, Body: b, Request: req}, b
		}},
		{name: "Read panics on a hedge", hedge: true, resp: func(req *http.Request) (*http.Response, io.Closer) {
			b := &panickyBody{}
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 5, Body: b, Request: req}, b
		}},
		{name: "Close fails", resp: func(req *http.Request) (*http.Response, io.Closer) {
			b := &failingCloseBody{Reader: strings.NewReader("ok")}
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 2, Body: b, Request: req}, b
		}, check: func(t *testing.T, resp *http.Response, err error, body io.Closer) {
			require.NoError(t, err)
			assert.Equal(t, "ok", readAll(t, resp.Body))
			assert.EqualValues(t, 1, body.(*failingCloseBody).closed.Load(), "closed once read")
			assert.NoError(t, resp.Body.Close())
			assert.EqualValues(t, 1, body.(*failingCloseBody).closed.Load())
		}},
		{name: "nil Body", resp: func(req *http.Request) (*http.Response, io.Closer) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req}, nil
		}, check: func(t *testing.T, resp *http.Response, err error, _ io.Closer) {
			require.NoError(t, err)
			assert.Nil(t, resp.Body)
		}},
		{name: "Content-Length -1", resp: func(req *http.Request) (*http.Response, io.Closer) {
			b := &failingCloseBody{Reader: strings.NewReader("unknown length")}
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: -1, Body: b, Request: req}, b
		}, check: func(t *testing.T, resp *http.Response, err error, _ io.Closer) {
			require.NoError(t, err)
			assert.Equal(t, "unknown length", readAll(t, resp.Body))
			resp.Body.Close()
		}},
		{name: "HEAD", method: http.MethodHead, resp: func(req *http.Request) (*http.Response, io.Closer) {
			b := &failingCloseBody{Reader: strings.NewReader("not content")}
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 11, Body: b, Request: req}, b
		}, check: func(t *testing.T, resp *http.Response, err error, body io.Closer) {
			require.NoError(t, err)
			assert.Same(t, body, resp.Body, "a response to HEAD is not read")
			resp.Body.Close()
			assert.EqualValues(t, 1, body.(*failingCloseBody).closed.Load())
		}},
		{name: "204", resp: func(req *http.Request) (*http.Response, io.Closer) {
			return &http.Response{StatusCode: 204, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		}, check: func(t *testing.T, resp *http.Response, err error, _ io.Closer) {
			require.NoError(t, err)
			assert.Equal(t, http.NoBody, resp.Body)
		}},
		{name: "304", resp: func(req *http.Request) (*http.Response, io.Closer) {
			return &http.Response{StatusCode: 304, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		}, check: func(t *testing.T, resp *http.Response, err error, _ io.Closer) {
			require.NoError(t, err)
			assert.Equal(t, http.StatusNotModified, resp.StatusCode)
			assert.Equal(t, "", readAll(t, resp.Body))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var body io.Closer
				var calls atomic.Int32
				base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					if calls.Add(1) > 1 {
						return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("next")), Request: req}, nil
					}
					resp, b := tc.resp(req)
					body = b
					return resp, nil
				})
				p := httpretry.Policy{ReadBodyBytes: 1024, Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 1, LimitMin: 1}}
				if tc.hedge {
					p.Hedge = httpretry.HedgePolicy{Delay: time.Second} // every attempt is sent on a goroutine of the round
				}
				tr := &httpretry.Transport{Base: base, Policy: p}
				req, err := http.NewRequestWithContext(t.Context(), cmpOr(tc.method, http.MethodGet), site, nil)
				require.NoError(t, err)
				var resp *http.Response
				panicked := func() (p any) {
					defer func() { p = recover() }()
					resp, err = tr.RoundTrip(req)
					return nil
				}()
				if tc.check == nil {
					require.Equal(t, "body read panics", panicked, "the panic reaches the caller")
					synctest.Wait()
					assert.EqualValues(t, 1, body.(*panickyBody).closed.Load(), "the body that panicked is closed")
				} else {
					require.Nil(t, panicked)
					tc.check(t, resp, err, body)
				}
				// The attempt's slot is free again: the next call is admitted at once.
				resp, err = tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
			})
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// A real net/http server that cuts the answer mid-body (HTTP/1.1: it
// closes the connection; HTTP/2: it resets the stream): with the limit, the
// keyed POST is retried and applied once; without it, the caller gets the
// response and the cut in its own Read, as before.
func TestReadBodyRealServerCutsMidBody(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("h2=%v/ReadBodyBytes on=%v", h2, on), func(t *testing.T) {
				t.Parallel()
				l := newLedger()
				srv := startServer(t, l, h2, nil)
				p := httpretry.Policy{Backoff: backoff.Constant(0)}
				if on {
					p.ReadBodyBytes = 4096
				}
				client := &http.Client{Transport: &httpretry.Transport{Base: srv.Client().Transport, Policy: p}}
				resp, err := client.Do(postCharge(t, t.Context(), srv.URL+"/charges"))
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, map[bool]int{false: 1, true: 2}[h2], resp.ProtoMajor)
				b, err := io.ReadAll(resp.Body)
				applied, answers := l.counts()
				if on {
					require.NoError(t, err)
					assert.Equal(t, `{"id":"ch_1","status":"succeeded"}`, string(b))
					assert.Equal(t, 2, answers)
				} else {
					assert.Error(t, err, "the cut reaches the caller's Read")
					assert.Equal(t, 1, answers)
				}
				assert.Equal(t, 1, applied, "applied once")
			})
		}
	}
}

// A body whose Read does not watch the request's context (an io.Pipe, as
// in-process transports return) still ends with its attempt: the timeout
// closes it, and the attempt is retried.
func TestReadBodyTimeoutEndsABodyThatIgnoresTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
				pr, pw := io.Pipe()
				t.Cleanup(func() { pw.Close() })
				return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req, ContentLength: 5, Body: pr}, nil
			}),
			httpretrytest.Respond(200, "fresh"))
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record, Policy: httpretry.Policy{
			ReadBodyBytes: 1024, AttemptTimeout: time.Second}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "fresh", readAll(t, resp.Body))
		resp.Body.Close()
		attempts := log.Attempts()
		require.Len(t, attempts, 2)
		assert.ErrorIs(t, attempts[0].Err, httpretry.ErrAttemptTimeout)
		assert.Equal(t, 1, upstream.Requests()[0].ResponseBody.Closes(), "closed once, by the timeout")
		httpretrytest.CheckBodiesClosed(t, upstream.Requests())
	})
}

// A Classify that panics while it reads the body: the panic reaches the
// caller and the body is closed, whether it was read whole or streams on.
func TestReadBodyClassifyPanicClosesTheBody(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{10, 10 << 10} {
		t.Run(fmt.Sprint(size, " bytes"), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				upstream := httpretrytest.NewScript(httpretrytest.Status(200).Filler(size))
				tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{ReadBodyBytes: 1024,
					Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
						io.ReadAll(resp.Body)
						panic("classify panics")
					}}}
				assert.PanicsWithValue(t, "classify panics", func() { tr.RoundTrip(get(t, t.Context())) })
				httpretrytest.CheckBodiesClosed(t, upstream.Requests())
			})
		})
	}
}

// contextPanicBody blocks in Read until its request's context ends, then
// panics: a hedge's body that panics once its attempt has lost.
type contextPanicBody struct {
	ctx    context.Context
	closed atomic.Int32
}

func (b *contextPanicBody) Read([]byte) (int, error) {
	<-b.ctx.Done()
	panic("read panics after losing")
}

func (b *contextPanicBody) Close() error { b.closed.Add(1); return nil }

// An attempt that lost its round, whose body's Read then panics on the
// round's goroutine, has no caller left: the panic is logged at Error, the
// body closed, and the winner's answer returned.
func TestReadBodyAbandonedHedgePanicIsLogged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var loser *contextPanicBody
		var calls atomic.Int32
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				loser = &contextPanicBody{ctx: req.Context()}
				return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 5, Body: loser, Request: req}, nil
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 5,
				Body: io.NopCloser(strings.NewReader("hedge")), Request: req}, nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			ReadBodyBytes: 1024, Hedge: httpretry.HedgePolicy{Delay: time.Second}}}
		o := watch(tr)
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "hedge", readAll(t, resp.Body))
		resp.Body.Close()
		synctest.Wait()
		assert.EqualValues(t, 1, loser.closed.Load(), "the loser's body is closed")
		lines := o.lines("level=ERROR")
		require.Len(t, lines, 1, "%s", o.log.String())
		assert.Contains(t, lines[0], "read panics after losing")
	})
}

// A 101's body is a connection, not content: it is not read, and stays
// writable.
func TestReadBodySwitchingProtocolsIsNotRead(t *testing.T) {
	t.Parallel()
	conn := &rwBody{Reader: strings.NewReader("frames")}
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{}, ContentLength: -1, Body: conn, Request: req}, nil
	})
	tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{ReadBodyBytes: 1024}}
	resp, err := tr.RoundTrip(get(t, t.Context()))
	require.NoError(t, err)
	_, writable := resp.Body.(io.ReadWriteCloser)
	assert.True(t, writable)
	assert.Equal(t, "frames", readAll(t, resp.Body), "not read ahead")
	resp.Body.Close()
	assert.EqualValues(t, 1, conn.closes.Load())
}

// A JSON API whose connection dies mid-body in 5 % of answers, on real
// sockets: with the limit, every keyed POST succeeds and each is applied
// once; without it, about 5 % of callers get a body they cannot read.
func TestReadBodyLedgerUnderCuts(t *testing.T) {
	t.Parallel()
	const calls, workers = 400, 8
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("ReadBodyBytes on=%v", on), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(22, 1))
			l := newLedger()
			l.cut = func(int) bool { return rng.IntN(100) < 5 } // under l.mu
			srv := startServer(t, l, false, nil)
			p := httpretry.Policy{Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget}
			if on {
				p.ReadBodyBytes = 4096
			}
			client := &http.Client{Transport: &httpretry.Transport{Base: srv.Client().Transport, Policy: p}}
			var ok, failed atomic.Int32
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range calls / workers {
						resp, err := client.Do(postCharge(t, t.Context(), srv.URL+"/charges"))
						if err == nil {
							_, err = io.ReadAll(resp.Body)
							resp.Body.Close()
						}
						if err != nil {
							failed.Add(1)
							continue
						}
						ok.Add(1)
					}
				})
			}
			wg.Wait()
			applied, answers := l.counts()
			t.Logf("ReadBodyBytes on=%v: %d of %d calls succeeded, %d charges applied, %d answers sent", on, ok.Load(), calls, applied, answers)
			assert.Equal(t, calls, applied, "each charge applied once")
			if on {
				assert.EqualValues(t, calls, ok.Load(), "every call succeeded")
				assert.Greater(t, answers, calls, "cut answers were sent again")
			} else {
				assert.Positive(t, failed.Load(), "cut answers reach the callers")
				assert.Equal(t, calls, answers)
			}
		})
	}
}

// FuzzReadBody: whatever the body's size, whether its length is known,
// the limit, how the body delivers its bytes and how much of it Classify
// reads, the classifier sees a prefix of the body of at most the limit,
// the Transport reads at most the limit and one byte before RoundTrip
// returns, the caller reads the body byte for byte, and the body is
// closed once.
func FuzzReadBody(f *testing.F) {
	f.Add(uint16(10), false, uint16(100), uint8(3), uint16(5))
	f.Add(uint16(100), true, uint16(99), uint8(0), uint16(200))
	f.Add(uint16(100), false, uint16(99), uint8(7), uint16(0))
	f.Add(uint16(0), true, uint16(0), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, size uint16, unknownLength bool, limit uint16, chunk uint8, classifierReads uint16) {
		payload := ixPayload(int(size))
		body := httpretrytest.NewBody(string(payload)).Slow(int(chunk), 0)
		cl := int64(size)
		if unknownLength {
			cl = -1
		}
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: cl, Body: body, Request: req}, nil
		})
		var seen []byte
		var readAhead int64
		n := int64(limit) + 1
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{ReadBodyBytes: n,
			Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
				readAhead = body.BytesRead()
				seen, _ = io.ReadAll(io.LimitReader(resp.Body, int64(classifierReads)))
				return httpretry.ClassDefault
			}}}
		resp, err := tr.RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		assert.LessOrEqual(t, int64(len(seen)), n, "the classifier reads at most the limit")
		assert.Equal(t, payload[:len(seen)], seen, "the classifier reads the body's first bytes")
		if int64(size) <= n {
			assert.Len(t, seen, min(int(size), int(classifierReads)), "a body within the limit is seen whole")
		}
		assert.LessOrEqual(t, readAhead, n+1, "read ahead at most the limit and one byte")
		if cl > n {
			assert.Zero(t, readAhead, "a Content-Length above the limit is not read ahead")
		}
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(payload, got), "the caller reads the body byte for byte")
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, 1, body.Closes())
	})
}

// TestReadAheadByteAfterTheLimit: the read ahead tells a body of exactly
// the limit from a longer one by one byte read on its own, past a buffer
// of the limit (so a 64 KiB limit holds 64 KiB, not the 72 KiB the
// allocator rounds 64 KiB and a byte up to). That byte reaches the
// caller in its place, also when it comes with io.EOF, whether the length
// is known or not; the classifier sees the limit and no more, and no end.
func TestReadAheadByteAfterTheLimit(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name string
		size int
		cl   bool
	}{
		{"unknown length, a byte more, with io.EOF", limit + 1, false},
		{"unknown length, many bytes more", 3*limit + 7, false},
		{"unknown length, exactly the limit", limit, false},
		{"known length, exactly the limit", limit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := ixPayload(tc.size)
			cl := int64(-1)
			if tc.cl {
				cl = int64(tc.size)
			}
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				// DataErrReader returns the last bytes with io.EOF
				body := io.NopCloser(iotest.DataErrReader(bytes.NewReader(payload)))
				return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: cl, Body: body, Request: req}, nil
			})
			var seen []byte
			var seenErr error
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{ReadBodyBytes: limit,
				Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
					seen, seenErr = io.ReadAll(resp.Body)
					return httpretry.ClassDefault
				}}}
			resp, err := tr.RoundTrip(get(t, context.Background()))
			require.NoError(t, err)
			if tc.size > limit {
				assert.Equal(t, payload[:limit], seen, "the classifier sees the limit")
				assert.Error(t, seenErr, "and is told the rest was not read ahead")
			} else {
				assert.Equal(t, payload, seen, "a body of the limit is seen whole")
				assert.NoError(t, seenErr)
			}
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, payload, got, "the caller reads the body byte for byte")
			require.NoError(t, resp.Body.Close())
		})
	}
}
