package httpretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tests send their requests to site, through a Base from package
// httpretrytest; these are the small helpers they share.

// site is the URL a request goes to unless its test needs another.
const site = "https://api.example.com/v1/things"

// get returns a GET of site with ctx.
func get(t *testing.T, ctx context.Context) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, site, nil)
	require.NoError(t, err)
	return req
}

// readAll reads r to its end, failing the test on an error.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatalf("read: %v", err)
	}
	return buf.String()
}

// errBoom is a failure for a Base or a body to return.
var errBoom = errors.New("boom")
