package httpretry_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// okResponse is shared by the in-memory Base, so the benchmark measures the
// Transport's own cost: what it adds to each call on the success path.
var okResponse = &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}

// BenchmarkRoundTrip compares a GET's success path through the Transport
// with the same Base called directly. The in-memory cases isolate the
// Transport's overhead (allocations included); the loopback cases put it
// next to a real HTTP exchange. The full comparison against other libraries
// lives in the bench module.
func BenchmarkRoundTrip(b *testing.B) {
	inMemory := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return okResponse, nil })
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/things", nil)
	b.Run("in-memory/bare", func(b *testing.B) { benchRT(b, inMemory, req) })
	b.Run("in-memory/httpretry", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: inMemory}, req) })
	b.Run("in-memory/httpretry-overload", func(b *testing.B) {
		benchRT(b, &httpretry.Transport{Base: inMemory, Policy: httpretry.Policy{
			Overload: httpretry.OverloadPolicy{Throttle: true, Limit: true, Pace: true}}}, req)
	})
	// What Policy.Endpoints costs a GET that its own host answers: the
	// call's endpoints, made at its start.
	b.Run("in-memory/httpretry-endpoints", func(b *testing.B) {
		benchRT(b, &httpretry.Transport{Base: inMemory, Hosts: map[string]httpretry.Policy{"api.example.com": {
			Endpoints: []string{"api.us.example.com", "api.ap.example.com"}}}}, req)
	})

	// A body of 2 bytes, read before RoundTrip returns or not: what
	// Policy.ReadBodyBytes costs when it is on.
	withBody := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, ContentLength: 2,
			Body: io.NopCloser(strings.NewReader("ok"))}, nil
	})
	b.Run("in-memory-body/httpretry", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: withBody}, req) })
	b.Run("in-memory-body/httpretry-readbody", func(b *testing.B) {
		benchRT(b, &httpretry.Transport{Base: withBody, Policy: httpretry.Policy{ReadBodyBytes: 4096}}, req)
	})

	// A body with a strong ETag, which the Transport can resume: what
	// Policy.MaxResumes costs a call whose body does not break.
	withETag := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Etag": {`"v1"`}}, ContentLength: 2,
			Body: io.NopCloser(strings.NewReader("ok"))}, nil
	})
	b.Run("in-memory-etag/httpretry", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: withETag}, req) })
	b.Run("in-memory-etag/httpretry-noresume", func(b *testing.B) {
		benchRT(b, &httpretry.Transport{Base: withETag, Policy: httpretry.Policy{MaxResumes: -1}}, req)
	})

	// A 1 MiB POST with GetBody (http.NewRequest with a *bytes.Reader),
	// which an in-memory Base reads whole: what the Transport adds to a
	// request body, its key and its replay. Each iteration builds its
	// request, in both cases.
	reads := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
		return okResponse, nil
	})
	b.Run("in-memory-post/bare", func(b *testing.B) { benchPost(b, reads) })
	b.Run("in-memory-post/httpretry", func(b *testing.B) { benchPost(b, &httpretry.Transport{Base: reads}) })

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	lreq, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	bare := &http.Transport{MaxIdleConnsPerHost: 64}
	defer bare.CloseIdleConnections()
	b.Run("loopback/bare", func(b *testing.B) { benchRT(b, bare, lreq) })
	b.Run("loopback/httpretry", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: bare}, lreq) })
}

func benchRT(b *testing.B, rt http.RoundTripper, req *http.Request) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// postBody is the body of BenchmarkRoundTrip's POST: 1 MiB.
var postBody = bytes.Repeat([]byte("0123456789abcdef"), 1<<20/16)

func benchPost(b *testing.B, rt http.RoundTripper) {
	b.ReportAllocs()
	b.SetBytes(int64(len(postBody)))
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/charges", bytes.NewReader(postBody))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkBudget measures budget admission under contention: every
// goroutine asks for a retry and reports a success, the two calls a retried
// request makes.
func BenchmarkBudget(b *testing.B) {
	for _, tc := range []struct {
		name string
		b    httpretry.Budget
	}{
		{"token-bucket", httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})},
		{"ratio", httpretry.NewRatioBudget(httpretry.RatioConfig{})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tc.b.Begin()
					if tc.b.AllowRetry(false) {
						tc.b.Succeeded(true, false)
					}
				}
			})
		})
	}
}

// BenchmarkSuccessPathBudget compares a GET's success path with the default
// budget and with none; the difference is the budget's cost to healthy calls.
func BenchmarkSuccessPathBudget(b *testing.B) {
	inMemory := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return okResponse, nil })
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/things", nil)
	noBudget := httpretry.Policy{NewBudget: httpretry.NoBudget}
	b.Run("in-memory/default-budget", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: inMemory}, req) })
	b.Run("in-memory/no-budget", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: inMemory, Policy: noBudget}, req) })

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	lreq, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	bare := &http.Transport{MaxIdleConnsPerHost: 64}
	defer bare.CloseIdleConnections()
	b.Run("loopback/default-budget", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: bare}, lreq) })
	b.Run("loopback/no-budget", func(b *testing.B) { benchRT(b, &httpretry.Transport{Base: bare, Policy: noBudget}, lreq) })
}
