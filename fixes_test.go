package httpretry_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestDrainIsBoundedInTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A byte every 50 ms, for ever, then a success.
		base := httpretrytest.NewScript(httpretrytest.Status(503).Filler(1<<30).Slow(1, 50*time.Millisecond), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		start := time.Now()
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 250*time.Millisecond, time.Since(start), "a trickling error body is cut after 250 ms")
		reqs := base.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, 1, reqs[0].ResponseBody.Closes(), "closed exactly once")
	})
}

// xnetStreamError has the shape of golang.org/x/net/http2.StreamError,
// which, unlike net/http's bundled copy, has no As method.
type xnetStreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e xnetStreamError) Error() string { return "stream error" }

func TestRefusedStreamFromXNet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			err      error
			attempts int
		}{
			{xnetStreamError{StreamID: 3, Code: 0x7}, 4},          // REFUSED_STREAM: never processed
			{&xnetStreamError{StreamID: 3, Code: 0x7}, 4},         // as a pointer
			{errors.Join(errBoom, xnetStreamError{Code: 0x7}), 4}, // wrapped
			{xnetStreamError{StreamID: 3, Code: 0x2}, 1},          // INTERNAL_ERROR: may have been processed
		} {
			fake := httpretrytest.NewScript(httpretrytest.Fail(tc.err))
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, site, strings.NewReader("x"))
			_, err := tr.RoundTrip(req)
			require.Error(t, err)
			assert.Len(t, fake.Requests(), tc.attempts, "%v", tc.err)
		}
	})
}

func TestUnknownErrorsOnOtherSchemesAreFatal(t *testing.T) {
	t.Parallel()
	fake := httpretrytest.NewScript(httpretrytest.Fail(errors.New(`unsupported protocol scheme "ftp"`)))
	tr := &httpretry.Transport{Base: fake}
	req, _ := http.NewRequest(http.MethodGet, "ftp://files.example.com/x", nil)
	_, err := tr.RoundTrip(req)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, httpretry.StopFatal, re.Reason)
	assert.Len(t, fake.Requests(), 1)
}

func TestContentLengthWithoutBody(t *testing.T) {
	t.Parallel()
	for _, body := range []bool{false, true} {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		req, _ := http.NewRequest(http.MethodPost, site, nil)
		if body {
			req.Body = http.NoBody
		}
		req.ContentLength = 10
		_, err := (&httpretry.Transport{Base: fake}).RoundTrip(req)
		assert.ErrorIs(t, err, httpretry.ErrInvalidRequest)
		assert.Empty(t, fake.Requests())
	}
}
