package httpretry_test

// Regressions found by a review of resuming: each test failed before its
// fix (body.go: the read is bounded by the representation's length, a
// multipart/byteranges answer is refused, every Content-Encoding field is
// read, a resume gives back its budget reservation on every path).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
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

// A 206 without a Content-Length (chunked, HTTP/2 without one) that sends
// more than its Content-Range: the bytes past the representation's length
// reach the caller.
func TestResumePartialContentLongerThanItsRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("a", 100), cut: 10}
		base.resume = func(req *http.Request, off int64) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusPartialContent, ContentLength: -1, Request: req,
				Header: http.Header{"Etag": {`"v1"`}, "Content-Range": {fmt.Sprintf("bytes %d-99/100", off)}},
				Body:   httpretrytest.NewBody(base.content[off:] + "TRAILING-GARBAGE")}, nil
		}
		got, err := download(t, context.Background(), tr(base), site, nil)
		assert.Len(t, got, 100, "never more than the representation's 100 bytes: %q", got[90:])
		_ = err
	})
}

// Every byte of the representation arrived, then the connection failed:
// the body is whole, but a resume for "bytes=100-" is sent and its answer
// (a 416 from a real server) fails the read.
func TestResumeCutAfterTheLastByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		content := strings.Repeat("a", 100)
		var reqs []string
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			reqs = append(reqs, req.Header.Get("Range"))
			if req.Header.Get("Range") != "" {
				return &http.Response{StatusCode: http.StatusRequestedRangeNotSatisfiable, Request: req,
					Header: http.Header{"Content-Range": {"bytes */100"}}, Body: http.NoBody}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, ContentLength: 100, Request: req,
				Header: http.Header{"Etag": {`"v1"`}},
				Body:   httpretrytest.NewBody(content).FailAfter(100, httpretrytest.ConnReset())}, nil
		})
		got, err := download(t, context.Background(), tr(base), site, nil)
		assert.Equal(t, content, string(got))
		assert.NoError(t, err, "all 100 bytes of a 100-byte body arrived")
		assert.Equal(t, []string{""}, reqs, "no resume for an empty range")
	})
}

// Two Content-Encoding fields, the first "identity": the body is gzip,
// yet it is resumed.
func TestResumeContentEncodingInTwoFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := 0
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			sent++
			return &http.Response{StatusCode: http.StatusOK, ContentLength: 100, Request: req,
				Header: http.Header{"Etag": {`"v1"`}, "Content-Encoding": {"identity", "gzip"}},
				Body:   httpretrytest.NewBody(strings.Repeat("x", 100)).FailAfter(10, nil)}, nil
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		_, err := download(t, context.Background(), tr, site, nil)
		var re *httpretry.ResumeError
		assert.False(t, errors.As(err, &re), "%v", err)
		assert.Equal(t, 1, sent, "a content-coded body is not resumed")
	})
}

// ixResumePanicBackoff is a Backoff that panics.
type ixResumePanicBackoff struct{}

func (*ixResumePanicBackoff) Delay(int, time.Duration, *rand.Rand) time.Duration {
	panic("backoff")
}

// A caller's Backoff that panics on a resume. → The retry cost taken from
// the budget just before is given back: no resume was sent.
func TestResumeBackoffPanicRefundsTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("x", 100), cut: 10}
		var bucket httpretry.Budget
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: &ixResumePanicBackoff{},
			NewBudget: func(string) httpretry.Budget {
				bucket = httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
				return bucket
			}}}
		resp, err := tr.RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		assert.Panics(t, func() { io.ReadAll(resp.Body) })
		resp.Body.Close()
		require.NotNil(t, bucket)
		assert.Equal(t, 10, tokens(bucket), "no resume was sent: its cost is refunded")
		assert.Len(t, base.requests(), 1)
	})
}

// Read and Close on two goroutines, with resumes in flight (run with -race).
func TestResumeReadCloseRace(t *testing.T) {
	for i := 0; i < 200; i++ {
		base := &rangeBase{content: strings.Repeat("x", 1000), cut: 7}
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0), MaxResumes: 1000,
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 1000}, Overload: httpretry.OverloadPolicy{Limit: true}},
			OnAttempt: func(httpretry.Attempt) {}}
		resp, err := tr.RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(io.Discard, resp.Body)
		}()
		time.Sleep(time.Duration(i%20) * time.Microsecond)
		resp.Body.Close()
		wg.Wait()
	}
}

// A 206 of multipart/byteranges (framing around the part) that also
// carries a top-level Content-Range and no Content-Length: the framing is
// spliced into the body.
func TestResumeMultipartPartialContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &rangeBase{content: strings.Repeat("a", 100), cut: 10}
		base.resume = func(req *http.Request, off int64) (*http.Response, error) {
			part := "--B\r\nContent-Range: bytes 10-99/100\r\n\r\n" + base.content[off:] + "\r\n--B--\r\n"
			return &http.Response{StatusCode: http.StatusPartialContent, ContentLength: -1, Request: req,
				Header: http.Header{"Etag": {`"v1"`}, "Content-Range": {"bytes 10-99/100"},
					"Content-Type": {"multipart/byteranges; boundary=B"}},
				Body: httpretrytest.NewBody(part)}, nil
		}
		got, _ := download(t, context.Background(), tr(base), site, nil)
		assert.NotContains(t, string(got), "--B", "no multipart framing in the body")
	})
}

// A 503 with Retry-After: 30 to a resume: the next resume is sent at
// once, where a retry would wait the 30 s the server asked for.
