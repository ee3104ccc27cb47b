package bench

// How much of a request body each library reads before the first attempt
// is sent: what it holds in memory in order to replay the body. The body
// counts its reads; the Base records the count when the first attempt
// reaches it, then reads the attempt's body to the end and answers 200.

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBody is a request body of n bytes that counts the bytes read
// from it. It is neither a bytes.Reader nor a strings.Reader nor an
// io.Seeker, so no library can replay it without reading it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func newCountingBody(n int) *countingBody {
	return &countingBody{r: bytes.NewReader(make([]byte, n))}
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestCompareRequestBodyBuffering: a POST of 2 MiB. go-retryablehttp and
// failsafehttp read the whole body before the first attempt, whether or not
// the request has GetBody (they ignore it), so the whole body is in memory
// before a byte is sent; that includes every body http.NewRequest builds,
// since it wraps the reader in an io.NopCloser. httpretry reads nothing from
// a body, with GetBody or without: the first attempt sends it as Base reads
// it (later ones call GetBody, or replay the copy kept of what was sent).
func TestCompareRequestBodyBuffering(t *testing.T) {
	const size = 2 << 20
	whole := map[string]int64{"httpretry": 0, "retryablehttp": size, "failsafehttp": size}
	cases := []struct {
		name string
		// build returns the request and a function reporting how many
		// bytes of its body have been read so far.
		build func() (*http.Request, func() int64)
		want  map[string]int64 // bytes read before the first attempt
	}{
		{"http.NewRequest over a bytes.Reader", func() (*http.Request, func() int64) {
			r := bytes.NewReader(make([]byte, size))
			req, _ := http.NewRequest(http.MethodPost, "http://bodies.test/", r)
			return req, func() int64 { return size - int64(r.Len()) }
		}, whole},
		{"GetBody set", func() (*http.Request, func() int64) {
			body := newCountingBody(size)
			req, _ := http.NewRequest(http.MethodPost, "http://bodies.test/", nil)
			req.Body, req.ContentLength = body, size
			req.GetBody = func() (io.ReadCloser, error) { return newCountingBody(size), nil }
			return req, body.read.Load
		}, whole},
		{"no GetBody", func() (*http.Request, func() int64) {
			body := newCountingBody(size)
			req, _ := http.NewRequest(http.MethodPost, "http://bodies.test/", nil)
			req.Body, req.ContentLength = body, -1
			return req, body.read.Load
		}, whole},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			for _, c := range cases {
				req, readSoFar := c.build()
				var before, sent int64 = -1, 0
				base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					if before < 0 {
						before = readSoFar()
					}
					n, err := io.Copy(io.Discard, req.Body)
					require.NoError(t, err)
					req.Body.Close()
					sent = n
					return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{},
						Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
				})
				resp, err := lib.new(base, 0).RoundTrip(req)
				require.NoError(t, err)
				closeResp(resp)
				assert.Equal(t, c.want[lib.name], before, "%s: bytes read before the first attempt", c.name)
				assert.Equal(t, int64(size), sent, "%s: the whole body sent", c.name)
			}
		})
	}
}
