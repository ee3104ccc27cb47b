package httpretry_test

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// unauthorizedIsTransient makes a 401 worth retrying, for PrepareRetry to
// refresh the credentials first.
func unauthorizedIsTransient(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
	if resp != nil && resp.StatusCode == http.StatusUnauthorized {
		return httpretry.ClassTransient
	}
	return httpretry.ClassDefault
}

// TestPrepareRetryRefreshesAToken: the hook sees the attempt that failed
// and edits the next attempt's request, a clone: the caller's request is
// untouched.
func TestPrepareRetryRefreshesAToken(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(401), httpretrytest.Status(200))
		var prevs []httpretry.Attempt
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Backoff:  backoff.Constant(0),
			Classify: unauthorizedIsTransient,
			PrepareRetry: func(prev httpretry.Attempt, next *http.Request) error {
				prevs = append(prevs, prev)
				next.Header.Set("Authorization", "Bearer fresh")
				return nil
			},
		}}
		req := get(t, t.Context())
		req.Header.Set("Authorization", "Bearer stale")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		reqs := up.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, "Bearer stale", reqs[0].Header.Get("Authorization"))
		assert.Equal(t, "Bearer fresh", reqs[1].Header.Get("Authorization"))
		assert.Equal(t, "Bearer stale", req.Header.Get("Authorization"), "the caller's request is untouched")
		require.Len(t, prevs, 1, "called before each retry, not before the first attempt")
		assert.Equal(t, 1, prevs[0].N)
		assert.Equal(t, 401, prevs[0].Response.StatusCode)
		assert.True(t, prevs[0].Retry)
	})
}

// TestPrepareRetryRefuses: an error from the hook sends no retry: the
// response in hand is returned, or, without one, a RetryError that wraps
// the hook's error; the retry's cost goes back to the budget.
func TestPrepareRetryRefuses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errNoToken := errors.New("token source: invalid_grant")
		refuse := func(httpretry.Attempt, *http.Request) error { return errNoToken }
		var calls []httpretry.Call
		bucket := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})
		policy := httpretry.Policy{
			Backoff:      backoff.Constant(0),
			Classify:     unauthorizedIsTransient,
			PrepareRetry: refuse,
			NewBudget:    func(string) httpretry.Budget { return bucket },
		}
		onCall := func(c httpretry.Call) { calls = append(calls, c) }

		up := httpretrytest.NewScript(httpretrytest.Respond(401, "expired"))
		tr := &httpretry.Transport{Base: up, Policy: policy, OnCall: onCall}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err, "the 401 in hand is returned")
		assert.Equal(t, 401, resp.StatusCode)
		assert.Equal(t, "expired", readAll(t, resp.Body))
		resp.Body.Close()
		httpretrytest.CheckAttempts(t, up.Requests(), 1)
		assert.Equal(t, httpretry.StopRefused, calls[0].Stop)
		assert.Equal(t, 500, tokens(bucket), "the refused retry cost nothing")

		up = httpretrytest.NewScript(httpretrytest.Fail(httpretrytest.ConnReset()))
		tr = &httpretry.Transport{Base: up, Policy: policy, OnCall: onCall}
		_, err = tr.RoundTrip(get(t, t.Context()))
		assert.ErrorIs(t, err, errNoToken)
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopRefused, re.Stop)
		assert.Equal(t, 1, re.Attempts)
		assert.Equal(t, 500, tokens(bucket))
	})
}

// TestPrepareRetrySeesTheHost: prev.Host is set for PrepareRetry even when
// nothing else observes attempts.
func TestPrepareRetrySeesTheHost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var host string
		tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200)),
			Policy: httpretry.Policy{Backoff: backoff.Constant(0), PrepareRetry: func(prev httpretry.Attempt, _ *http.Request) error {
				host = prev.Host
				return nil
			}}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "api.example.com:443", host)
	})
}
