package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The overhead benchmarks send the same requests to one loopback server
// through four clients, each over its own identically configured
// *http.Transport: the bare transport (the floor), httpretry's default
// policy, go-retryablehttp's RoundTripper and failsafehttp's round tripper.
// Every request succeeds at once, so what differs is each library's
// success-path cost. Sub-benchmarks are named case=…/client=…. To compare
// them, do not use -count: it runs each sub-benchmark's samples in one
// block, so a noisy minute lands on one client. cmd/report runs rounds
// instead, each client in its own process (-test.bench
// '^BenchmarkOverhead$/./^client=NAME$' -test.count 1), the order turned
// every round, and compares within rounds and with benchstat -col /client.

// payload is a 1 MiB body, httpretry's default replay limit; large is 8
// MiB, above it, which httpretry streams once without a copy.
var (
	payload = bytes.Repeat([]byte("0123456789abcdef"), 1<<20/16)
	large   = bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
)

// overheadClients returns the four clients, each on a fresh transport.
func overheadClients() []struct {
	name string
	rt   http.RoundTripper
} {
	cs := []struct {
		name string
		rt   http.RoundTripper
	}{{"bare", newBare()}}
	for _, lib := range libraries {
		cs = append(cs, struct {
			name string
			rt   http.RoundTripper
		}{lib.name, lib.new(newBare(), 100*time.Millisecond)})
	}
	return cs
}

// opaque hides the reader's type: http.NewRequest then sets no GetBody, so
// a library must copy the body itself to be able to send it again.
type opaque struct{ io.Reader }

// overheadCase builds the request of one iteration.
type overheadCase struct {
	name string
	req  func(url string) *http.Request
}

var overheadCases = []overheadCase{
	{"get", func(url string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		return req
	}},
	{"post-1MiB-getbody", func(url string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
		return req
	}},
	{"post-1MiB-opaque", func(url string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, opaque{bytes.NewReader(payload)})
		req.ContentLength = int64(len(payload))
		return req
	}},
	{"post-8MiB-opaque", func(url string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, opaque{bytes.NewReader(large)})
		req.ContentLength = int64(len(large))
		return req
	}},
}

func newOverheadServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if n != r.ContentLength {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func roundTrip(tb testing.TB, rt http.RoundTripper, req *http.Request) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkOverhead is the success-path cost of each client, per case.
func BenchmarkOverhead(b *testing.B) {
	srv := newOverheadServer(b)
	clients := overheadClients()
	for _, c := range overheadCases {
		for _, cl := range clients {
			b.Run("case="+c.name+"/client="+cl.name, func(b *testing.B) {
				b.ReportAllocs()
				runtime.GC() // start clean of the previous sub-benchmark's garbage
				get := c.name == "get"
				req := c.req(srv.URL)
				for b.Loop() {
					if !get { // a body is read once; a GET request is reused
						req = c.req(srv.URL)
					}
					roundTrip(b, cl.rt, req)
				}
			})
		}
		if c.name == "get" {
			for _, cl := range clients {
				b.Run("case=get-parallel/client="+cl.name, func(b *testing.B) {
					b.ReportAllocs()
					runtime.GC()
					b.RunParallel(func(pb *testing.PB) {
						req := c.req(srv.URL)
						for pb.Next() {
							roundTrip(b, cl.rt, req)
						}
					})
				})
			}
		}
	}
}

// TestOverheadClientsWork runs every benchmark case once per client, so a
// broken client shows up in go test rather than in a benchmark run.
func TestOverheadClientsWork(t *testing.T) {
	srv := newOverheadServer(t)
	for _, cl := range overheadClients() {
		for _, c := range overheadCases {
			t.Run(c.name+"/"+cl.name, func(t *testing.T) {
				resp, err := cl.rt.RoundTrip(c.req(srv.URL))
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode, "the server got the whole body")
			})
		}
	}
}
