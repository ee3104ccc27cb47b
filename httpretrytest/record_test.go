package httpretrytest_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/httpretrytest"
)

// TestRequestsReturnsIndependentCopies: what one Requests call hands back
// may be edited freely; later calls, and the Check functions that read
// them, still see what the upstream saw.
func TestRequestsReturnsIndependentCopies(t *testing.T) {
	t.Parallel()
	upstreams := map[string]interface {
		http.RoundTripper
		Requests() []httpretrytest.Request
	}{
		"Script": httpretrytest.NewScript(httpretrytest.Status(200)),
		"HandlerTransport": &httpretrytest.HandlerTransport{Handler: http.HandlerFunc(
			func(w http.ResponseWriter, _ *http.Request) {})},
	}
	for name, upstream := range upstreams {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := newReq(t, t.Context(), http.MethodGet, "/v1/items?page=2", "")
			req.URL.User = url.UserPassword("ann", "secret")
			req.Header.Set("Idempotency-Key", "k1")
			req.Header.Add("X-Trace", "a")
			resp, err := upstream.RoundTrip(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())

			got := upstream.Requests()
			require.Len(t, got, 1)
			got[0].Header.Del("Idempotency-Key")
			got[0].Header["X-Trace"][0] = "edited"
			got[0].URL.Path = "/edited"
			got[0].URL.RawQuery = ""
			*got[0].URL.User = *url.User("mallory")
			got[0].Body = append(got[0].Body, "edited"...)

			again := upstream.Requests()
			require.Len(t, again, 1)
			assert.Equal(t, "k1", again[0].Header.Get("Idempotency-Key"))
			assert.Equal(t, []string{"a"}, again[0].Header["X-Trace"])
			assert.Equal(t, "/v1/items", again[0].URL.Path)
			assert.Equal(t, "page=2", again[0].URL.RawQuery)
			assert.Equal(t, "ann:secret", again[0].URL.User.String())
			assert.Empty(t, again[0].Body)
		})
	}
}
