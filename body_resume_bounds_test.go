package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// rangeBase is a fake Base that serves content with a strong ETag and
// answers a Range with a 206 from its offset. Each body it returns breaks
// after cut bytes (0: never); resume, if set, answers Range requests
// instead.
type rangeBase struct {
	content string
	cut     int64
	stall   bool // a resume's body breaks before its first byte: no progress
	resume  func(req *http.Request, off int64) (*http.Response, error)

	mu     sync.Mutex
	reqs   []*http.Request
	bodies []*httpretrytest.Body
}

func (b *rangeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	b.mu.Unlock()
	off := int64(0)
	status := http.StatusOK
	h := http.Header{"Etag": {`"v1"`}}
	if r := req.Header.Get("Range"); r != "" {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r, "bytes="), "-"), 10, 64)
		if err != nil {
			return nil, err
		}
		if b.resume != nil {
			return b.resume(req, n)
		}
		off, status = n, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(b.content)-1, len(b.content)))
	}
	body := httpretrytest.NewBody(b.content[off:])
	switch {
	case b.stall && off > 0:
		body.FailAfter(0, nil)
	case b.cut > 0 && int64(len(b.content))-off > b.cut:
		body.FailAfter(b.cut, nil)
	}
	b.mu.Lock()
	b.bodies = append(b.bodies, body)
	b.mu.Unlock()
	return &http.Response{StatusCode: status, Header: h, Body: body, ContentLength: int64(len(b.content)) - off, Request: req}, nil
}

func (b *rangeBase) requests() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.reqs...)
}

func (b *rangeBase) allClosed(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, body := range b.bodies {
		assert.Equal(t, 1, body.Closes(), "body %d closed once", i)
	}
}

func TestResumeCarriesTheCallersRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("0123456789", 10), cut: 30}
		sent := 0
		tr := &httpretry.Transport{Base: httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			sent++
			if sent == 1 {
				return &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			}
			return base.RoundTrip(req)
		}), Policy: httpretry.Policy{
			AttemptHeader: "X-Attempt", MaxAttempts: 8,
			Classify: unauthorizedIsTransient,
			PrepareRetry: func(_ httpretry.Attempt, next *http.Request) error {
				next.Header.Set("Authorization", "Bearer fresh")
				return nil
			},
		}}
		req := get(t, context.Background())
		req.Header.Set("X-Caller", "yes")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, base.content, readAll(t, resp.Body))
		require.NoError(t, resp.Body.Close())

		reqs := base.requests()
		require.Len(t, reqs, 4, "the retry, then three resumes")
		for i, r := range reqs {
			assert.Equal(t, "yes", r.Header.Get("X-Caller"))
			assert.Equal(t, "Bearer fresh", r.Header.Get("Authorization"), "PrepareRetry's edit")
			assert.Equal(t, strconv.Itoa(i+2), r.Header.Get("X-Attempt"))
			n, ok := httpretry.AttemptFromContext(r.Context())
			assert.True(t, ok)
			assert.Equal(t, i+2, n)
			if i > 0 {
				assert.Equal(t, "bytes="+strconv.Itoa(30*i)+"-", r.Header.Get("Range"))
				assert.Equal(t, `"v1"`, r.Header.Get("If-Range"))
				assert.Error(t, r.Context().Err(), "a replaced or closed body ends its attempt's context")
			}
		}
		assert.Empty(t, req.Header.Get("Range"), "the caller's request is not modified")
		base.allClosed(t)
	})
}

// A body cut again and again, each resume delivering bytes before the next
// cut, is read in full with the default policy: MaxResumes bounds the
// resumes in a row that bring nothing, and the backoff starts afresh after
// progress, so a 256 MiB download cut every 16 MiB neither runs out of
// resumes nor waits ever longer (it waited 18 s of backoff in 16 resumes).
func TestResumeProgressStartsTheCountAfresh(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("0123456789", 10), cut: 10}
		var waits []time.Duration
		w := recordingBackoff{Strategy: backoff.Default(), waits: &waits}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: w}}
		got, err := download(t, context.Background(), tr, site, nil)
		require.NoError(t, err)
		assert.Equal(t, base.content, string(got))
		assert.Len(t, base.requests(), 10, "nine resumes, more than the default three, each after progress")
		for i, d := range waits {
			assert.LessOrEqual(t, d, 100*time.Millisecond, "resume %d waits a first retry's backoff", i+1)
		}
		base.allClosed(t)
	})
}

// recordingBackoff passes on Strategy's delays and records them.
type recordingBackoff struct {
	backoff.Strategy
	waits *[]time.Duration
}

func (r recordingBackoff) Delay(n int, prev time.Duration, rng *rand.Rand) time.Duration {
	d := r.Strategy.Delay(n, prev, rng)
	*r.waits = append(*r.waits, d)
	return d
}

func TestResumesAreBounded(t *testing.T) {
	t.Parallel()
	t.Run("MaxResumes", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10, stall: true}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxResumes: 2}}
			start := time.Now()
			_, err := download(t, context.Background(), tr, site, nil)
			var re *httpretry.ResumeError
			require.ErrorAs(t, err, &re)
			assert.Contains(t, re.Reason, "no resumes left")
			assert.EqualValues(t, 10, re.Offset, "no resume delivered a byte")
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Len(t, base.requests(), 3)
			assert.Greater(t, time.Since(start), time.Duration(0), "resumes wait the backoff")
			base.allClosed(t)
		})
	})
	t.Run("MaxAttempts", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10, stall: true}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 3}}
			_, err := download(t, context.Background(), tr, site, nil)
			require.ErrorContains(t, err, "no resumes left")
			assert.Len(t, base.requests(), 3, "MaxAttempts-1 resumes")
		})
	})
	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxResumes: 9,
				NewBudget: func(string) httpretry.Budget {
					return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
				}}}
			_, err := download(t, context.Background(), tr, site, nil)
			var re *httpretry.ResumeError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, httpretry.ErrBudgetExhausted)
			assert.Len(t, base.requests(), 3, "two resumes paid for")
			st := tr.Stats()
			require.Len(t, st, 1)
			assert.EqualValues(t, 2, st[0].Retries)
		})
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Minute)}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			_, err := download(t, ctx, tr, site, nil)
			var re *httpretry.ResumeError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, backoff.ErrDeadline)
			assert.Less(t, time.Since(start), time.Second, "no wait past the deadline is started")
			assert.Len(t, base.requests(), 1)
		})
	})
	t.Run("cancelled during the wait", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Minute)}}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			_, err := download(t, ctx, tr, site, nil)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Len(t, base.requests(), 1)
		})
	})
	t.Run("cancelled before the cut", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
			tr := &httpretry.Transport{Base: base}
			ctx, cancel := context.WithCancel(context.Background())
			resp, err := tr.RoundTrip(get(t, ctx))
			require.NoError(t, err)
			cancel()
			_, err = io.ReadAll(resp.Body)
			var re *httpretry.ResumeError
			assert.False(t, errors.As(err, &re), "no resume after the caller's context ended: %v", err)
			assert.Len(t, base.requests(), 1)
			resp.Body.Close()
		})
	})
	t.Run("a 503 to a resume is resumed again", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 50}
			failed := false
			base.resume = func(req *http.Request, off int64) (*http.Response, error) {
				if !failed {
					failed = true
					return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: httpretrytest.NewBody("busy"), Request: req}, nil
				}
				return &http.Response{StatusCode: http.StatusPartialContent, Request: req, ContentLength: 100 - off,
					Header: http.Header{"Etag": {`"v1"`}, "Content-Range": {fmt.Sprintf("bytes %d-99/100", off)}},
					Body:   httpretrytest.NewBody(base.content[off:])}, nil
			}
			got, err := download(t, context.Background(), tr(base), site, nil)
			require.NoError(t, err)
			assert.Equal(t, base.content, string(got))
			assert.Len(t, base.requests(), 3)
		})
	})
}

func tr(base http.RoundTripper) *httpretry.Transport { return &httpretry.Transport{Base: base} }

func TestResumeRejectsAPartialContentThatDoesNotFit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header http.Header
		length int64
		reason string
	}{
		{"another offset", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 0-99/100"}}, 100, "does not start"},
		{"another length", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-119/120"}}, 110, "another length"},
		{"unknown length", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-99/*"}}, 90, "not known"},
		{"short of the end", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-49/100"}}, 40, "end of the representation"},
		{"another ETag", http.Header{"Etag": {`"v2"`}, "Content-Range": {"bytes 10-99/100"}}, 90, "ETag"},
		{"no ETag", http.Header{"Content-Range": {"bytes 10-99/100"}}, 90, "ETag"},
		{"a content coding", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-99/100"}, "Content-Encoding": {"gzip"}}, 90, "content coding"},
		{"no Content-Range", http.Header{"Etag": {`"v1"`}}, 90, "Content-Range"},
		{"garbage Content-Range", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-9/100"}}, 90, "does not parse"},
		{"Content-Length off", http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-99/100"}}, 80, "Content-Length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				base := &rangeBase{content: strings.Repeat("a", 100), cut: 10}
				other := httpretrytest.NewBody(strings.Repeat("b", 90))
				base.resume = func(req *http.Request, off int64) (*http.Response, error) {
					return &http.Response{StatusCode: http.StatusPartialContent, Header: tc.header, Body: other, ContentLength: tc.length, Request: req}, nil
				}
				got, err := download(t, context.Background(), tr(base), site, nil)
				assert.Equal(t, strings.Repeat("a", 10), string(got), "never a byte of the other answer")
				var re *httpretry.ResumeError
				require.ErrorAs(t, err, &re)
				assert.Contains(t, re.Reason, tc.reason)
				assert.Equal(t, http.StatusPartialContent, re.Status)
				assert.Equal(t, 1, other.Closes())
			})
		})
	}
}

func TestResumePanicInBaseReleasesEverything(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
		var resumeCtx context.Context
		base.resume = func(req *http.Request, off int64) (*http.Response, error) {
			resumeCtx = req.Context()
			panic("boom")
		}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{AttemptTimeout: time.Minute,
			Breaker:  httpretry.BreakerPolicy{ConsecutiveFailures: 5},
			Overload: httpretry.OverloadPolicy{Limit: true}}}
		resp, err := tr.RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		assert.PanicsWithValue(t, "boom", func() { io.ReadAll(resp.Body) })
		require.NotNil(t, resumeCtx)
		assert.Error(t, resumeCtx.Err(), "the resume's context is ended")
		_, err = resp.Body.Read(make([]byte, 1))
		assert.Error(t, err, "no more reads")
		assert.Len(t, base.requests(), 2, "no further resume")
		resp.Body.Close()
		base.allClosed(t)
		st := tr.Stats()
		require.Len(t, st, 1)
		require.NotNil(t, st[0].Limit)
		assert.Zero(t, st[0].Limit.InFlight, "the limiter's slot is given back")
		require.NotNil(t, st[0].Breaker)
		assert.Zero(t, st[0].Breaker.Failures, "the panicked resume's trial is given back without an outcome")
	})
}

func TestResumeHookPanicReleasesTheResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{AttemptTimeout: time.Minute},
			OnAttempt: func(a httpretry.Attempt) {
				if a.Resume {
					panic("hook")
				}
			}}
		resp, err := tr.RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		assert.PanicsWithValue(t, "hook", func() { io.ReadAll(resp.Body) })
		reqs := base.requests()
		require.Len(t, reqs, 2)
		assert.Error(t, reqs[1].Context().Err(), "the resume's context is ended")
		base.allClosed(t)
		_, err = resp.Body.Read(make([]byte, 1))
		assert.Error(t, err)
		resp.Body.Close()
	})
}

func TestCloseDuringAResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inBase bool
	}{{"during the wait", false}, {"in Base", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
				var resumeCtx context.Context
				base.resume = func(req *http.Request, off int64) (*http.Response, error) {
					resumeCtx = req.Context()
					<-req.Context().Done()
					return nil, context.Cause(req.Context())
				}
				resp, err := tr(base).RoundTrip(get(t, context.Background()))
				require.NoError(t, err)
				done := make(chan error)
				go func() {
					_, err := io.ReadAll(resp.Body)
					done <- err
				}()
				synctest.Wait()
				if tc.inBase {
					time.Sleep(10 * time.Second) // past the longest backoff
					synctest.Wait()
					require.NotNil(t, resumeCtx, "the resume is in Base")
				}
				require.NoError(t, resp.Body.Close())
				err = <-done
				assert.Error(t, err)
				var re *httpretry.ResumeError
				assert.False(t, errors.As(err, &re), "a closed body is not a failed resume: %v", err)
				if tc.inBase {
					assert.Len(t, base.requests(), 2)
					assert.Error(t, resumeCtx.Err())
				} else {
					assert.Len(t, base.requests(), 1)
				}
				base.allClosed(t)
			})
		})
	}
}

// A resume holds no copy of the body: reading through it allocates
// nothing per Read.
func TestResumeBodyHoldsNoCopy(t *testing.T) {
	base := &rangeBase{content: strings.Repeat("x", 1<<20)}
	resp, err := tr(base).RoundTrip(get(t, context.Background()))
	require.NoError(t, err)
	defer resp.Body.Close()
	buf := make([]byte, 1024)
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestResumeIsLoggedAndAdmittedLikeAnAttempt(t *testing.T) {
	t.Parallel()
	t.Run("a refused answer is logged with resume", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
			base.resume = func(req *http.Request, _ int64) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Etag": {`"v2"`}}, Body: httpretrytest.NewBody("new"), Request: req}, nil
			}
			tr := tr(base)
			o := watch(tr)
			_, err := download(t, context.Background(), tr, site, nil)
			require.ErrorContains(t, err, "whole representation again")
			lines := o.lines("resume=true")
			require.Len(t, lines, 1, o.log.String())
			assert.Contains(t, lines[0], "attempt=2")
			assert.Contains(t, lines[0], "status=200")
			assert.Contains(t, lines[0], "level=WARN")
			require.Len(t, o.attempts, 2)
			assert.True(t, o.attempts[1].Resume)
			assert.Equal(t, httpretry.StopFatal, o.attempts[1].Stop)
		})
	})
	t.Run("an open breaker refuses a resume", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
			base.resume = func(req *http.Request, _ int64) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			}
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxResumes: 5,
				Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: time.Hour}}}
			_, err := download(t, context.Background(), tr, site, nil)
			var re *httpretry.ResumeError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, httpretry.ErrCircuitOpen)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Len(t, base.requests(), 2, "the 503 opened the breaker; the next resume was not sent")
		})
	})
}

func TestResumeOnlyForTheSafeCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		req    func(*http.Request) *http.Request
		header http.Header
		policy httpretry.Policy
	}{
		{name: "Accept-Ranges: none", header: http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"none"}}},
		{name: "a Content-Encoding", header: http.Header{"Etag": {`"v1"`}, "Content-Encoding": {"br"}}},
		{name: "two ETags", header: http.Header{"Etag": {`"v1"`, `"v2"`}}},
		{name: "a malformed ETag", header: http.Header{"Etag": {`v1`}}},
		{name: "a weak ETag beside a strong Last-Modified", header: http.Header{"Etag": {`W/"v1"`},
			"Last-Modified": {"Mon, 02 Jan 2006 15:04:05 GMT"}, "Date": {"Tue, 03 Jan 2006 15:04:05 GMT"}}},
		{name: "a Last-Modified without a Date", header: http.Header{"Last-Modified": {"Mon, 02 Jan 2006 15:04:05 GMT"}}},
		{name: "a caller's Range", req: func(r *http.Request) *http.Request {
			r.Header.Set("Range", "bytes=0-")
			return r
		}},
		{name: "HEAD", req: func(r *http.Request) *http.Request {
			r.Method = http.MethodHead
			return r
		}},
		{name: "a hedging policy", policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: time.Hour}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var sent int
				header := tc.header
				if header == nil {
					header = http.Header{"Etag": {`"v1"`}}
				}
				base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					sent++
					return &http.Response{StatusCode: http.StatusOK, Header: header, ContentLength: 100,
						Body: httpretrytest.NewBody(strings.Repeat("x", 100)).FailAfter(10, nil), Request: req}, nil
				})
				tc.policy.Backoff = backoff.Constant(0)
				tr := &httpretry.Transport{Base: base, Policy: tc.policy}
				req := get(t, context.Background())
				if tc.req != nil {
					req = tc.req(req)
				}
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				var re *httpretry.ResumeError
				assert.False(t, errors.As(err, &re))
				assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
				assert.Equal(t, 1, sent, "no resume")
			})
		})
	}
}

// A resume answered 503 with Retry-After: 5. → The next resume waits at
// least the 5 s the server asked for, as a retry would, not the backoff's
// few hundred milliseconds.
func TestResumeObeysRetryAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		content := strings.Repeat("x", 100)
		var times []time.Time
		base := &rangeBase{content: content, cut: 10}
		base.resume = func(req *http.Request, off int64) (*http.Response, error) {
			times = append(times, time.Now())
			if len(times) == 1 {
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"5"}},
					Body: http.NoBody, Request: req}, nil
			}
			h := http.Header{"Etag": {`"v1"`}, "Content-Range": {fmt.Sprintf("bytes %d-%d/%d", off, len(content)-1, len(content))}}
			return &http.Response{StatusCode: http.StatusPartialContent, Header: h, ContentLength: int64(len(content)) - off,
				Body: io.NopCloser(strings.NewReader(content[off:])), Request: req}, nil
		}
		tr := &httpretry.Transport{Base: base}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, content, string(got))
		require.Len(t, times, 2)
		wait := times[1].Sub(times[0])
		assert.GreaterOrEqual(t, wait, 5*time.Second, "the server asked for 5 s")
		assert.LessOrEqual(t, wait, 6*time.Second, "at most 10 % later")
	})
}

// A resume answered 503 with a Retry-After above MaxRetryAfter. → The read
// ends at once with a ResumeError carrying the 503, as a call returns such
// an answer: no wait of an hour inside the caller's Read.
func TestResumeRetryAfterAboveTheBoundEndsTheRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
		resumes := 0
		base.resume = func(req *http.Request, off int64) (*http.Response, error) {
			resumes++
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"3600"}},
				Body: http.NoBody, Request: req}, nil
		}
		tr := &httpretry.Transport{Base: base}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		start := time.Now()
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		var re *httpretry.ResumeError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, http.StatusServiceUnavailable, re.Status)
		assert.Equal(t, int64(10), re.Offset)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the read error that broke the body")
		assert.Equal(t, 1, resumes)
		assert.Less(t, time.Since(start), time.Second, "no wait for the hour asked")
	})
}

// An isolated cut of a body that was flowing (64 KiB or more since it was
// accepted) is resumed at once; the backoff is for cuts in a row, which
// bring nothing. Before, every resume waited a first retry's backoff, and
// a 64 MiB download cut every 8 MiB over loopback ran at 0.14 of its
// uncut speed with the default policy.
func TestResumeAfterAFlowingBodyGoesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("0123456789abcdef", 1<<16), cut: 256 << 10}
		var waits []time.Duration
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: recordingBackoff{Strategy: backoff.Default(), waits: &waits}}}
		start := time.Now()
		got, err := download(t, context.Background(), tr, site, nil)
		require.NoError(t, err)
		assert.Equal(t, base.content, string(got))
		assert.Len(t, base.requests(), 4, "three resumes, each after 256 KiB")
		assert.Empty(t, waits, "a resume after a flowing body waited a backoff")
		assert.Zero(t, time.Since(start), "the download waited")
		base.allClosed(t)
	})
	synctest.Test(t, func(t *testing.T) {
		// The resumes after the first bring nothing: each waits its backoff.
		base := &rangeBase{content: strings.Repeat("0123456789abcdef", 1<<14), cut: 128 << 10, stall: true}
		var waits []time.Duration
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: recordingBackoff{Strategy: backoff.Default(), waits: &waits}}}
		_, err := download(t, context.Background(), tr, site, nil)
		var re *httpretry.ResumeError
		require.ErrorAs(t, err, &re)
		assert.Len(t, base.requests(), 4, "the default three resumes")
		assert.Len(t, waits, 2, "the first resume goes at once, the two in a row after it wait")
	})
}
