package bench

// What each library does to the connection pool: how much of a discarded
// response it reads before closing it, whether the retry can then reuse
// the connection, and whether giving up closes the pool's idle
// connections. Connections are counted at the server, as the distinct
// client addresses its requests came from.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connServer answers with the statuses in turn (the last repeats), each
// body size bytes long, and records the client address of every request.
type connServer struct {
	*httptest.Server
	mu    sync.Mutex
	n     int
	addrs map[string]bool
}

func newConnServer(t *testing.T, size int, statuses ...int) *connServer {
	s := &connServer{addrs: map[string]bool{}}
	body := strings.Repeat("x", size)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		status := statuses[min(s.n, len(statuses)-1)]
		s.n++
		s.addrs[r.RemoteAddr] = true
		s.mu.Unlock()
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// conns is the number of connections requests arrived on.
func (s *connServer) conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}

// TestCompareDiscardedBodiesDrained: two 503s, then a 200, with bodies of
// 26 bytes, 16 KiB and 100 KiB. A discarded response's connection can serve
// the retry only if its body was read to the end before being closed.
// httpretry reads up to 64 KiB (or 250 ms), so the two smaller sizes keep
// one connection. go-retryablehttp reads 4 KiB (respReadLimit): only the
// small body keeps its connection; a larger one is closed part-read and
// every retry dials anew. failsafehttp neither reads nor closes them: every
// retry needs a new connection, and the old ones stay checked out.
func TestCompareDiscardedBodiesDrained(t *testing.T) {
	type want struct {
		read  int64 // bytes read from each discarded body
		conns int
	}
	const kib = 1 << 10
	sizes := []int{26, 16 * kib, 100 * kib}
	wants := map[string][]want{
		"httpretry":     {{26, 1}, {16 * kib, 1}, {64 * kib, 3}},
		"retryablehttp": {{26, 1}, {4 * kib, 3}, {4 * kib, 3}},
		"failsafehttp":  {{0, 3}, {0, 3}, {0, 3}},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			for i, size := range sizes {
				srv := newConnServer(t, size, 503, 503, 200)
				tr := &tracker{base: newBare()}
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				resp, err := lib.new(tr, 0).RoundTrip(req)
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				read, closed := tr.read()[:2], tr.closed()[:2]
				closeResp(resp)
				w := wants[lib.name][i]
				assert.Equal(t, []int64{w.read, w.read}, read, "%d-byte bodies: bytes read from the discarded 503s", size)
				assert.Equal(t, []bool{w.read > 0, w.read > 0}, closed, "%d-byte bodies: discarded 503s closed", size)
				assert.Equal(t, w.conns, srv.conns(), "%d-byte bodies: connections for 3 attempts", size)
			}
		})
	}
}

// idleCounter is a Base that counts calls to CloseIdleConnections, which
// http.Client.CloseIdleConnections forwards to its transport.
type idleCounter struct {
	*http.Transport
	closes atomic.Int32
}

func (c *idleCounter) CloseIdleConnections() {
	c.closes.Add(1)
	c.Transport.CloseIdleConnections()
}

// TestCompareIdleConnectionsOnGiveUp: one client calls host B (200), then
// host A, which only answers 503, until the library gives up, then B
// again. go-retryablehttp closes its client's idle connections whenever it
// gives up, so B's pooled connection is gone and the second call to B dials
// a new one. httpretry and failsafehttp leave the pool alone.
func TestCompareIdleConnectionsOnGiveUp(t *testing.T) {
	closes := map[string]int32{"httpretry": 0, "retryablehttp": 1, "failsafehttp": 0}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			a, b := newConnServer(t, 26, 503), newConnServer(t, 26, 200)
			base := &idleCounter{Transport: newBare()}
			rt := lib.new(base, 0)
			get := func(url string) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				resp, err := rt.RoundTrip(req)
				var ee retrypolicy.ExceededError
				if errors.As(err, &ee) { // failsafehttp: the last response is in the error
					resp, _ = ee.LastResult.(*http.Response)
				}
				closeResp(resp)
			}
			get(b.URL)
			get(a.URL)
			get(b.URL)
			assert.Equal(t, closes[lib.name], base.closes.Load(), "CloseIdleConnections calls")
			assert.Equal(t, 1+int(closes[lib.name]), b.conns(), "connections to B for its two calls")
		})
	}
}
