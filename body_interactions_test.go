package httpretry_test

// Issue 19, defects 1, 2, 3 and 8: request bodies that are shared, seekable
// or live streams, and a response body whose Close does not interrupt Read.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Defect 1, over real sockets: azcore's GetBody seeks one underlying
// stream back to 0 and returns that same stream. A server that answers 503
// before reading a 4 MiB PUT leaves net/http's write loop still reading the
// previous attempt's body when the Transport rewinds it. → Before GetBody,
// the Transport waits until Base has closed the previous attempt's body, so
// every body the server reads in full equals the caller's bytes, and every
// upload ends in a 201.
func TestSharedStreamGetBodyOverRealSockets(t *testing.T) {
	t.Parallel()
	payload := ixPayload(4 << 20)
	want := sha256.Sum256(payload)
	var mu sync.Mutex
	var read, bad int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Attempt") == "1" {
			w.WriteHeader(http.StatusServiceUnavailable) // before reading a byte
			return
		}
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		mu.Lock()
		defer mu.Unlock()
		read++
		if err != nil || n != int64(len(payload)) || [sha256.Size]byte(h.Sum(nil)) != want {
			bad++
			t.Logf("upload %s attempt %s: the server read %d bytes (%v), not the caller's %d", r.URL.Path, r.Header.Get("X-Attempt"), n, err, len(payload))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	policy := ixNoWait
	policy.AttemptHeader = "X-Attempt"
	tr := &httpretry.Transport{Base: srv.Client().Transport, Policy: policy}

	const uploads = 40
	for i := range uploads {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s := newIxSharedStream(payload)
		resp, err := tr.RoundTrip(s.request(t, ctx, http.MethodPut, srv.URL+"/container/blob"+strconv.Itoa(i)))
		cancel()
		if assert.NoError(t, err, "upload %d", i) {
			resp.Body.Close()
			assert.Equal(t, http.StatusCreated, resp.StatusCode, "upload %d", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, bad, "of %d bodies the server read, %d were not the caller's bytes", read, bad)
}

// Defect 1, deterministic: a Base that, like net/http's write loop, keeps
// reading the previous attempt's body on a goroutine after it returned a
// 503, and closes it only when done. The body is a shared stream that
// records every overlapping use of it. → The Transport rewinds it only once
// Base has closed the previous attempt's body: no overlapping Read or Seek,
// and the retry carries exactly the caller's bytes.
func TestSharedStreamGetBodyWaitsForBaseToCloseTheBody(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		payload := ixPayload(64 << 10)
		s := newIxSharedStream(payload)
		s.hold, s.chunk = time.Millisecond, 4<<10 // each Read takes 1 ms of the fake clock
		var mu sync.Mutex
		var retried [][]byte
		writeLoopDone := make(chan struct{})
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 {
				started := make(chan struct{})
				go func() { // the write loop, still sending after the response came
					defer close(writeLoopDone)
					buf := make([]byte, 4<<10)
					var once sync.Once
					for {
						_, err := req.Body.Read(buf)
						once.Do(func() { close(started) })
						if err != nil {
							break
						}
					}
					req.Body.Close()
				}()
				<-started
				return ixResp(req, http.StatusServiceUnavailable), nil
			}
			b, _ := io.ReadAll(req.Body)
			req.Body.Close()
			mu.Lock()
			retried = append(retried, b)
			mu.Unlock()
			return ixResp(req, http.StatusCreated), nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}

		resp, err := tr.RoundTrip(s.request(t, t.Context(), http.MethodPut, "https://account.blob.example.com/container/blob"))
		<-writeLoopDone
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Zero(t, s.overlaps.Load(), "the stream was used by two attempts at once")
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 1, len(retried), "retries")
		ixSameBytes(t, payload, retried[0], "the retry's body")
	})
}

// Defect 2: aws-sdk-go-v2 sends an io.ReadSeeker body without GetBody;
// every S3 multipart part is over 1 MiB. → A seekable body is rewound with
// Seek to where it started, with no copy and no size limit: a 4 MiB body
// under the default MaxReplayBytes is retried after a 503, and every attempt
// carries the whole of it.
func TestSeekableBodyIsRewoundNotBuffered(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		payload := ixPayload(4 << 20)
		const skip = 16 // the body starts part-way into its reader, as a part of a file does
		r := bytes.NewReader(append(bytes.Repeat([]byte{'-'}, skip), payload...))
		_, err := r.Seek(skip, io.SeekStart)
		require.NoError(t, err)
		body := &ixSeekBody{Reader: r}
		up := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: up}
		req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.s3.example.com/key?partNumber=1&uploadId=u", nil)
		req.Body, req.ContentLength = body, int64(len(payload))

		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, "the 503 was retried")
		reqs := up.Requests()
		require.Equal(t, 2, len(reqs), "attempts")
		for i, r := range reqs {
			ixSameBytes(t, payload, r.Body, "attempt %d's body", i+1)
		}
		assert.NotZero(t, body.seeks.Load(), "the body was rewound with Seek")
	})
}

// Defect 3: a full-duplex exchange over an io.Pipe request body (write a
// message, wait for the reply, write the next: gRPC or Connect over
// net/http, tunnels). → The body is sent at once and never read ahead, so
// each message gets its reply, with the default policy and with
// WithoutRetries alike.
func TestStreamingBodyIsNotReadAhead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) context.Context
	}{
		{"default policy", func(ctx context.Context) context.Context { return ctx }},
		{"WithoutRetries", httpretry.WithoutRetries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				echo := &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					in := bufio.NewReader(r.Body)
					for {
						line, err := in.ReadString('\n')
						if err != nil {
							return
						}
						io.WriteString(w, "echo "+line)
					}
				})}
				tr := &httpretry.Transport{Base: echo}
				ctx, cancel := context.WithTimeout(tc.ctx(t.Context()), 10*time.Second)
				defer cancel()
				pr, pw := io.Pipe()
				defer pw.Close()
				type result struct {
					resp *http.Response
					err  error
				}
				req := ixReq(t, ctx, http.MethodPost, "https://tunnel.example.com/stream", pr)
				done := make(chan result, 1)
				go func() {
					resp, err := tr.RoundTrip(req)
					done <- result{resp, err}
				}()

				go io.WriteString(pw, "one\n") // the first message, before any reply
				var res result
				select {
				case res = <-done:
				case <-ctx.Done():
					t.Fatal("no response before the deadline: the body is being read ahead")
				}
				require.NoError(t, res.err, "no response: the body was read ahead instead of sent")
				defer res.resp.Body.Close()
				replies := bufio.NewReader(res.resp.Body)
				for _, msg := range []string{"one", "two", "three"} {
					if msg != "one" {
						go io.WriteString(pw, msg+"\n")
					}
					line, err := replies.ReadString('\n')
					require.NoError(t, err)
					assert.Equal(t, "echo "+msg+"\n", line)
				}
				pw.Close()
				_, err := io.ReadAll(res.resp.Body)
				assert.NoError(t, err)
			})
		})
	}
}

// Defect 3, what replay keeps: a copy of what Base read, up to
// MaxReplayBytes. → A small body with neither GetBody nor Seek that Base
// read in full is replayed byte for byte after a 503; one that outgrew
// MaxReplayBytes is not retried, and the 503 comes back to the caller.
func TestStreamedBodyReplayFromWhatBaseRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		size     int
		limit    int64
		attempts int
		status   int
	}{
		{"small body, replayed", 1000, 0, 2, 200},
		{"body past MaxReplayBytes, not retried", 4 << 10, 1 << 10, 1, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				payload := ixPayload(tc.size)
				up := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
				var log httpretrytest.AttemptLog
				tr := &httpretry.Transport{Base: up, OnAttempt: log.Record, Policy: httpretry.Policy{MaxReplayBytes: tc.limit}}
				opaque := struct{ io.Reader }{bytes.NewReader(payload)} // no GetBody, no Seek, no length
				resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodPut, "https://api.example.com/v1/doc", opaque))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.status, resp.StatusCode)
				reqs := up.Requests()
				require.Equal(t, tc.attempts, len(reqs), "attempts")
				for i, r := range reqs {
					ixSameBytes(t, payload, r.Body, "attempt %d's body", i+1)
				}
				if tc.attempts == 1 {
					attempts := log.Attempts()
					require.Len(t, attempts, 1)
					assert.Equal(t, httpretry.StopNotReplayable, attempts[0].Stop)
				}
			})
		})
	}
}

// Defect 8: a Base whose 503 body is an io.NopCloser over a pipe that is
// never written (an in-process transport, a bridge, a cache): Close does
// not interrupt Read. → The caller's deadline bounds the drain of the
// retried response whatever the body does: RoundTrip returns by its 1 s
// deadline.
func TestDrainIsBoundedByTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close() // ends the drain's Read if it is still blocked, so no goroutine is left
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			return ixRespBody(req, http.StatusServiceUnavailable, io.NopCloser(pr)), nil
		})
		tr := &httpretry.Transport{Base: base}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req := ixReq(t, ctx, http.MethodGet, "https://cache.example.com/item", nil)
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		select {
		case <-done:
			assert.LessOrEqual(t, time.Since(start), time.Second, "RoundTrip returned after the deadline")
		case <-time.After(time.Minute):
			t.Errorf("RoundTrip had not returned %v after its 1 s deadline: the drain is blocked in Read", time.Since(start))
			pw.Close()
			<-done
		}
	})
}

// ixSharedStream is azcore's request body: one io.ReadSeeker that GetBody
// rewinds and hands out again. It is not safe for concurrent use; instead
// of corrupting memory it serialises its callers and counts every call that
// found another one inside. The lock is a channel, not a sync.Mutex, so
// that a caller waiting for it inside a synctest bubble is durably blocked
// and the fake clock moves on. Create it inside the bubble that uses it.
type ixSharedStream struct {
	lock     chan struct{}
	r        *bytes.Reader
	hold     time.Duration // how long each Read holds the stream, on the caller's clock
	chunk    int           // the most a Read returns; 0: no limit
	overlaps atomic.Int32
}

func newIxSharedStream(b []byte) *ixSharedStream {
	return &ixSharedStream{lock: make(chan struct{}, 1), r: bytes.NewReader(b)}
}

func (s *ixSharedStream) enter() {
	select {
	case s.lock <- struct{}{}:
	default:
		s.overlaps.Add(1)
		s.lock <- struct{}{}
	}
}

func (s *ixSharedStream) leave() { <-s.lock }

func (s *ixSharedStream) Read(p []byte) (int, error) {
	s.enter()
	defer s.leave()
	if s.hold > 0 {
		time.Sleep(s.hold)
	}
	if s.chunk > 0 && len(p) > s.chunk {
		p = p[:s.chunk]
	}
	return s.r.Read(p)
}

func (s *ixSharedStream) Seek(offset int64, whence int) (int64, error) {
	s.enter()
	defer s.leave()
	return s.r.Seek(offset, whence)
}

func (s *ixSharedStream) Close() error { return nil }

// request returns a request whose body is s and whose GetBody rewinds s and
// returns it, as azcore's does.
func (s *ixSharedStream) request(t *testing.T, ctx context.Context, method, url string) *http.Request {
	req := ixReq(t, ctx, method, url, s)
	req.ContentLength = s.r.Size()
	req.GetBody = func() (io.ReadCloser, error) {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return s, nil
	}
	return req
}

// ixSeekBody is an io.ReadSeekCloser body, as aws-sdk-go-v2 sends, that
// counts its Seeks.
type ixSeekBody struct {
	*bytes.Reader
	seeks atomic.Int32
}

func (b *ixSeekBody) Seek(offset int64, whence int) (int64, error) {
	b.seeks.Add(1)
	return b.Reader.Seek(offset, whence)
}

func (b *ixSeekBody) Close() error { return nil }

// A Base whose write loop is stuck inside a Read of the previous attempt's
// body (the caller's reader blocks: a file on a stalled network mount, a
// reader waiting on a producer) when the retry needs the body again. The
// body is a seekable one without GetBody, or a shared stream with a
// GetBody that rewinds it: the retry must wait for that Read before it can
// rewind. → The wait is bounded by the caller's context: RoundTrip returns
// by the deadline with the context's error, never later; a hedge does not
// wait at all.
func TestStuckBodyReadDoesNotHoldTheRetryPastTheDeadline(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"Seek", "GetBody", "GetBody hedged"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				body := &ixStuckBody{data: []byte("part of a large upload"), release: release}
				req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.s3.example.com/key", nil)
				req.Body, req.ContentLength = body, int64(len(body.data))
				if mode != "Seek" {
					req.GetBody = func() (io.ReadCloser, error) {
						if _, err := body.Seek(0, io.SeekStart); err != nil {
							return nil, err
						}
						return body, nil
					}
				}
				readersDone := make(chan struct{})
				defer func() {
					close(release)
					<-readersDone
				}()
				base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 {
						inRead := make(chan struct{})
						go func() { // the write loop: stuck in a Read after the answer came
							defer close(readersDone)
							body.entered = inRead
							io.Copy(io.Discard, req.Body)
							req.Body.Close()
						}()
						<-inRead
						if mode == "GetBody hedged" {
							<-req.Context().Done() // slow: the hedge timer fires
							return nil, req.Context().Err()
						}
						return ixResp(req, http.StatusServiceUnavailable), nil
					}
					io.Copy(io.Discard, req.Body)
					req.Body.Close()
					return ixResp(req, http.StatusOK), nil
				})
				p := httpretry.Policy{Backoff: backoff.Constant(0)}
				if mode == "GetBody hedged" {
					// The first hedge reads a copy taken at the start; the
					// second calls GetBody on the round's loop.
					p.Hedge = httpretry.HedgePolicy{Delay: 10 * time.Millisecond, MaxHedges: 2}
				}
				tr := &httpretry.Transport{Base: base, Policy: p}
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				start := time.Now()
				resp, err := tr.RoundTrip(req.WithContext(ctx))
				elapsed := time.Since(start)
				if err == nil {
					resp.Body.Close()
				}
				assert.LessOrEqual(t, elapsed, 5*time.Second, "RoundTrip returned by the caller's deadline")
				if mode != "GetBody hedged" {
					require.Error(t, err)
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				}
			})
		})
	}
}

// ixStuckBody is a seekable request body whose second Read blocks until
// release is closed, having closed entered.
type ixStuckBody struct {
	data    []byte
	off     int64
	reads   int
	entered chan struct{}
	release chan struct{}
}

func (b *ixStuckBody) Read(p []byte) (int, error) {
	b.reads++
	if b.reads == 2 {
		close(b.entered)
		<-b.release
	}
	if b.off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 4)], b.data[b.off:])
	b.off += int64(n)
	return n, nil
}

func (b *ixStuckBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		b.off = offset
	case io.SeekCurrent:
		b.off += offset
	default:
		return 0, errors.New("ixStuckBody: no SeekEnd")
	}
	return b.off, nil
}

func (b *ixStuckBody) Close() error { return nil }

// A hedge's Base calls GetBody (a signer hashing the body) while the first
// attempt's write loop is stuck in a Read of the caller's Body. → The copy
// waits at most until the hedge's context ends, and the round's loop never
// waits behind it: RoundTrip returns by the caller's deadline.
func TestGetBodyInsideAHedgeDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stuck := &ixBlockedBody{entered: make(chan struct{}), release: make(chan struct{})}
		defer close(stuck.release)
		req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.example.com/key", nil)
		req.Body, req.ContentLength = stuck, 5
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch n, _ := httpretry.AttemptFromContext(req.Context()); n {
			case 1:
				go io.Copy(io.Discard, req.Body) // the write loop, stuck in the caller's Read
				<-stuck.entered
			case 2: // the first hedge: a signer hashing the body
				if rc, err := req.GetBody(); err == nil {
					io.Copy(io.Discard, rc)
					rc.Close()
				}
			}
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0),
			Hedge: httpretry.HedgePolicy{Delay: 10 * time.Millisecond, MaxHedges: 2}}}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.LessOrEqual(t, time.Since(start), 300*time.Millisecond, "RoundTrip returned by the caller's deadline")
	})
}

// When the caller's deadline ends a retry's wait for Base to leave a Read
// of the body, the call stopped on its context: RetryError.Stop and
// Call.Stop say so, not that the body could not be replayed.
func TestBusyBodyWaitEndedByTheDeadlineStopsOnTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		body := &ixStuckBody{data: []byte("part of a large upload"), release: release}
		req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.s3.example.com/key", nil)
		req.Body, req.ContentLength = body, int64(len(body.data))
		readersDone := make(chan struct{})
		defer func() {
			close(release)
			<-readersDone
		}()
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			inRead := make(chan struct{})
			go func() {
				defer close(readersDone)
				body.entered = inRead
				io.Copy(io.Discard, req.Body)
				req.Body.Close()
			}()
			<-inRead
			return ixResp(req, http.StatusServiceUnavailable), nil
		})
		var stop httpretry.StopReason
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
			OnCall: func(c httpretry.Call) { stop = c.Stop }}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := tr.RoundTrip(req.WithContext(ctx))
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopContext, re.Stop, "RetryError.Stop")
		assert.Equal(t, httpretry.StopContext, stop, "Call.Stop")
	})
}

// ixBlockedBody is a request body whose Read blocks until release is
// closed, having closed entered.
type ixBlockedBody struct {
	entered, release chan struct{}
	once             sync.Once
}

func (b *ixBlockedBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return 0, io.EOF
}

func (b *ixBlockedBody) Close() error { return nil }

// The same stop on the context as TestBusyBodyWaitEndedByTheDeadlineStopsOnTheContext,
// for a body replayed from the copy Base read (no Seek, no GetBody), with a
// deadline shorter than rewindWait: detach gives up on the context, and the
// error it leaves in r.broken wraps errBodyBusy, not ErrBusy, so begin
// reports StopNotReplayable.
func TestBusyCopiedBodyWaitEndedByTheDeadlineStopsOnTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stuck := &ixBlockedBody{entered: make(chan struct{}), release: make(chan struct{})}
		defer close(stuck.release)
		req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.example.com/key", nil)
		req.Body, req.ContentLength = stuck, 5
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			go io.Copy(io.Discard, req.Body)
			<-stuck.entered
			return ixResp(req, http.StatusServiceUnavailable), nil
		})
		var stop httpretry.StopReason
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
			OnCall: func(c httpretry.Call) { stop = c.Stop }}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(req.WithContext(ctx))
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, httpretry.StopContext, re.Stop, "RetryError.Stop")
		assert.Equal(t, httpretry.StopContext, stop, "Call.Stop")
	})
}

// A request signer in Base calls the attempt's GetBody, and the caller's
// GetBody panics. copyBody holds the replay's mutex across newReader
// without a defer, so the panic leaves it locked, and RoundTrip's deferred
// Replay.End blocks on it forever instead of raising the panic.
func TestGetBodyPanicInsideBaseIsRaisedNotHung(t *testing.T) {
	t.Parallel()
	req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.example.com/key", strings.NewReader("hello"))
	req.GetBody = func() (io.ReadCloser, error) { panic(errIxPanic) }
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		rc, err := req.GetBody() // a signer hashing the body
		if err != nil {
			return nil, err
		}
		rc.Close()
		return ixResp(req, http.StatusOK), nil
	})
	tr := &httpretry.Transport{Base: base, Policy: ixNoWait}
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case p := <-done:
		assert.Equal(t, errIxPanic, p, "the GetBody's panic reaches the caller")
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip hung after a panic in the caller's GetBody")
	}
}

// A seekable body (no GetBody) whose second Read stalls 2 s (past
// rewindWait), after which the old attempt's write loop streams on, one
// byte per 1 ms Read. next's detach gives up after rewindWait and, in Seek
// mode, ignores the error and drops the body from r.sent without detaching
// it: the old write loop reads on, and every time waitStream is handed the
// stream's lock and lets go of it, the write loop takes it back before
// newReader's tryLock. → The retry should go once the stalled Read returns
// (~2 s); it waits until the old attempt has read the whole body (~6 s).
func TestUndetachedBodyDoesNotStarveTheRetry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		body := &ixSlowSeekBody{data: bytes.Repeat([]byte("x"), 4000)}
		req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.s3.example.com/key", nil)
		req.Body, req.ContentLength = body, int64(len(body.data))
		var retryAt time.Duration
		start := time.Now()
		writeLoop := make(chan struct{})
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 {
				go func() {
					defer close(writeLoop)
					io.Copy(io.Discard, req.Body)
					req.Body.Close()
				}()
				time.Sleep(10 * time.Millisecond) // inside the stalled second Read
				return ixResp(req, http.StatusServiceUnavailable), nil
			}
			retryAt = time.Since(start)
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
			return ixResp(req, http.StatusOK), nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(req.WithContext(ctx))
		require.NoError(t, err)
		resp.Body.Close()
		<-writeLoop
		assert.LessOrEqual(t, retryAt, 2500*time.Millisecond, "the retry goes once the stalled Read returned, not after the old attempt read the whole body")
	})
}

// ixSlowSeekBody is a seekable body read one byte per Read, each taking
// 1 ms; its second Read takes 2 s.
type ixSlowSeekBody struct {
	data  []byte
	off   int64
	reads int
}

func (b *ixSlowSeekBody) Read(p []byte) (int, error) {
	b.reads++
	if b.reads == 2 {
		time.Sleep(2 * time.Second)
	} else {
		time.Sleep(time.Millisecond)
	}
	if b.off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p[:1], b.data[b.off:])
	b.off += int64(n)
	return n, nil
}

func (b *ixSlowSeekBody) Seek(offset int64, whence int) (int64, error) {
	if whence != io.SeekStart && whence != io.SeekCurrent {
		return 0, errors.New("no SeekEnd")
	}
	if whence == io.SeekCurrent {
		offset += b.off
	}
	b.off = offset
	return b.off, nil
}

func (b *ixSlowSeekBody) Close() error { return nil }

// A hedge's signer calls GetBody, and the caller's GetBody is slow (it
// reopens the payload from a slow store). copyBody holds the replay's
// mutex across the caller's GetBody, so the round's loop blocks on it in
// Hedgeable at the next hedge timer, and Replay.End at the end of
// RoundTrip: RoundTrip returns when GetBody does (10 s), not by the
// caller's deadline (300 ms).
func TestSlowGetBodyInAHedgeDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	func() { // real time: a goroutine blocked on a sync.Mutex stops a synctest bubble's clock
		var calls atomic.Int32
		req := ixReq(t, t.Context(), http.MethodPut, "https://bucket.example.com/key", strings.NewReader("hello"))
		req.GetBody = func() (io.ReadCloser, error) {
			if calls.Add(1) > 1 { // the first is the replay's probe
				time.Sleep(3 * time.Second)
			}
			return io.NopCloser(strings.NewReader("hello")), nil
		}
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if n, _ := httpretry.AttemptFromContext(req.Context()); n == 2 {
				if rc, err := req.GetBody(); err == nil { // a signer hashing the body
					rc.Close()
				}
			}
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0),
			Hedge: httpretry.HedgePolicy{Delay: 10 * time.Millisecond, MaxHedges: 2}}}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.LessOrEqual(t, time.Since(start), time.Second, "RoundTrip returned by (about) the caller's deadline")
	}()
}
