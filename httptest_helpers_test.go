package httpretry_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trackedBody counts Close calls.
type trackedBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *trackedBody) Close() error { b.closed.Add(1); return nil }

// countingBody is a request body that counts Close calls and can fail
// after some bytes.
type countingBody struct {
	r       io.Reader
	failAt  int
	read    int
	closed  atomic.Int32
	failErr error
}

func newCountingBody(s string) *countingBody {
	return &countingBody{r: strings.NewReader(s), failAt: -1}
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.failAt >= 0 && b.read >= b.failAt {
		return 0, b.failErr
	}
	if b.failAt >= 0 && len(p) > b.failAt-b.read {
		p = p[:b.failAt-b.read]
	}
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { b.closed.Add(1); return nil }

var errBoom = errors.New("boom")

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatalf("read: %v", err)
	}
	return buf.String()
}
