package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setup starts the flaky API and returns it, its URL and an httpretry
// Transport with no backoff waits whose attempts rec records.
func setup(t *testing.T) (api *flakyAPI, url string, rt *httpretry.Transport, rec *httpretrytest.AttemptLog) {
	t.Helper()
	api = newFlakyAPI()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	rec = &httpretrytest.AttemptLog{}
	rt = &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Constant(0)}, OnAttempt: rec.Record}
	return api, srv.URL, rt, rec
}

// TestRestyGetRetriedByHTTPRetry: a GET answered 503, 503, 200 reaches
// resty as one 200, decoded into the result.
func TestRestyGetRetriedByHTTPRetry(t *testing.T) {
	t.Parallel()
	_, url, rt, rec := setup(t)
	var order Order
	resp, err := newClient(url, rt).R().SetResult(&order).Get("/orders/7")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode())
	assert.Equal(t, Order{ID: 7, Status: "shipped"}, order)
	got := rec.Attempts()
	require.Len(t, got, 3)
	assert.True(t, got[0].Retry && got[1].Retry)
	assert.Equal(t, httpretry.StopSuccess, got[2].Stop)
}

// TestRestyPOSTReplayedWithOneKey: resty's JSON body reaches httpretry with
// GetBody set, is replayed whole on the retry, with the same
// Idempotency-Key, and the API creates one order.
func TestRestyPOSTReplayedWithOneKey(t *testing.T) {
	t.Parallel()
	api, url, rt, _ := setup(t)
	var getBody bool // whether resty's request reaches httpretry with GetBody set
	client := newClient(url, rt).SetTransport(httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		getBody = req.GetBody != nil
		return rt.RoundTrip(req)
	}))
	var created Order
	resp, err := client.R().
		SetBody(map[string]any{"item": "widget", "quantity": 3}).SetResult(&created).Post("/orders")
	require.NoError(t, err)
	assert.True(t, getBody, "resty sets GetBody: httpretry replays the body without copying it")
	assert.Equal(t, http.StatusCreated, resp.StatusCode())
	assert.Equal(t, 100, created.ID)
	assert.Equal(t, 1, api.orderCount(), "created once")
	api.mu.Lock()
	defer api.mu.Unlock()
	require.Len(t, api.bodies["/orders"], 2)
	assert.JSONEq(t, `{"item":"widget","quantity":3}`, api.bodies["/orders"][0])
	assert.Equal(t, api.bodies["/orders"][0], api.bodies["/orders"][1], "the whole body on the retry")
	assert.NotEmpty(t, api.keys["/orders"][0])
	assert.Equal(t, api.keys["/orders"][0], api.keys["/orders"][1], "one key for both attempts")
}

// TestRestyRetriesOff: newClient leaves resty's retries off, so a failure
// costs exactly httpretry's attempts (4). With resty's retries on as well
// (SetRetryCount(2)), resty retries every error httpretry returns, and each
// of its 3 tries runs httpretry's 4 attempts: 12 attempts for one call.
func TestRestyRetriesOff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		restyRetries, attempts int
	}{{0, 4}, {2, 12}} {
		refused := httpretrytest.NewScript(httpretrytest.Fail(httpretrytest.DialRefused()))
		client := newClient("http://orders.test", &httpretry.Transport{Base: refused,
			Policy: httpretry.Policy{Backoff: backoff.Constant(0)}})
		if c.restyRetries > 0 {
			client.SetRetryCount(c.restyRetries).SetRetryWaitTime(time.Millisecond).SetRetryMaxWaitTime(time.Millisecond)
		}
		_, err := client.R().Get("/orders/7")
		var re *httpretry.RetryError
		require.True(t, errors.As(err, &re), "%v", err)
		assert.Equal(t, c.attempts, len(refused.Requests()), "resty retries %d: attempts", c.restyRetries)
	}
}
