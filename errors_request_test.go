package httpretry_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// TestNilHeaderIsInvalid: a request with a nil Header is refused before any
// attempt, as http.Transport refuses it, instead of panicking when a key or
// an attempt header is added, or retrying net/http's permanent error.
func TestNilHeaderIsInvalid(t *testing.T) {
	t.Parallel()
	for _, p := range []httpretry.Policy{
		{},                       // POST gets an idempotency key
		{AttemptHeader: "X-Try"}, // every attempt gets a header
		{Keys: httpretry.KeyPolicy{Disabled: true}}, // nothing added
	} {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		body := httpretrytest.NewBody("x")
		req := &http.Request{Method: http.MethodPost, URL: &url.URL{Scheme: "https", Host: "api.example.com", Path: "/"}, Body: body}
		resp, err := (&httpretry.Transport{Base: fake, Policy: p}).RoundTrip(req)
		assert.Nil(t, resp)
		require.ErrorIs(t, err, httpretry.ErrInvalidRequest)
		assert.ErrorContains(t, err, "nil Header")
		assert.Empty(t, fake.Requests())
		assert.Equal(t, 1, body.Closes(), "body closed")
	}
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
