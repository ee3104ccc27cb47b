package httpretry_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// TestThrottlingRefusesLocally: once a host has turned away most attempts,
// throttling refuses new ones before Base sees them, with ErrThrottled; a
// refusal is no attempt (OnAttempt sees only what Base saw), is reported
// to OnCall and the log, and shows in Stats.
func TestThrottlingRefusesLocally(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{MaxAttempts: 1,
			Overload: httpretry.OverloadPolicy{Throttle: true}}}
		o := watch(tr)
		const calls = 200
		refused := 0
		for range calls {
			resp, err := tr.RoundTrip(get(t, t.Context()))
			if err != nil {
				requireLocalRefusal(t, err, httpretry.ErrThrottled, httpretry.StopThrottled)
				assert.Contains(t, err.Error(), "api.example.com:443")
				refused++
				continue
			}
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			resp.Body.Close()
			time.Sleep(10 * time.Millisecond)
		}
		sent := len(fake.Requests())
		// The first 10 outcomes fill the window; after that, 9 in 10 are
		// refused, the cap: about 10 + 190/10 sent.
		assert.InDelta(t, 29, sent, 12, "attempts sent")
		assert.Equal(t, calls, sent+refused)
		assert.Len(t, o.attempts, sent, "one OnAttempt per attempt Base saw")
		assert.Equal(t, map[httpretry.StopReason]int{httpretry.StopAttempts: sent, httpretry.StopThrottled: refused}, o.stops())
		for _, c := range o.calls {
			if c.Stop == httpretry.StopThrottled {
				assert.Zero(t, c.Attempts)
				assert.ErrorIs(t, c.Err, httpretry.ErrThrottled)
			}
		}
		logged := o.lines(`msg="httpretry: request not sent"`)
		require.Len(t, logged, refused)
		assert.Contains(t, logged[0], "level=WARN")
		assert.Contains(t, logged[0], "stop=throttled")

		s := statsOf(t, tr, "api.example.com:443")
		assert.True(t, s.Throttle != nil)
		assert.InDelta(t, 0.9, s.Throttle.Probability, 1e-9)
		assert.Equal(t, int64(refused), s.Throttle.Refusals)
		assert.Equal(t, int64(sent), s.Attempts)
		assert.Nil(t, s.Limit)
		assert.Nil(t, s.Pacing)
	})
}

// TestThrottlingRefusedRetryKeepsTheAnswer: a retry the throttle refuses
// ends the call with the response in hand, costs no attempt and gives its
// budget charge back.
func TestThrottlingRefusedRetryKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond),
			Overload: httpretry.OverloadPolicy{Throttle: true}}}
		o := watch(tr)
		for range 10 { // fill the window with failures
			resp, err := tr.RoundTrip(get(t, httpretry.WithoutRetries(t.Context())))
			require.NoError(t, err)
			resp.Body.Close()
		}
		var found bool
		for range 500 {
			before := statsOf(t, tr, "api.example.com:443")
			n := len(fake.Requests())
			o.calls = nil
			resp, err := tr.RoundTrip(get(t, t.Context()))
			if err != nil || len(fake.Requests()) != n+1 {
				if resp != nil {
					resp.Body.Close()
				}
				continue // refused before the first attempt, or retried
			}
			// The first attempt went out, and the retry was refused.
			found = true
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the answer in hand")
			assert.Equal(t, "Service Unavailable", readAll(t, resp.Body))
			resp.Body.Close()
			require.Len(t, o.calls, 1)
			assert.Equal(t, httpretry.StopThrottled, o.calls[0].Stop)
			assert.Equal(t, 1, o.calls[0].Attempts)
			after := statsOf(t, tr, "api.example.com:443")
			assert.Equal(t, before.Budget.Available, after.Budget.Available, "the retry's cost was given back")
			assert.Equal(t, before.Retries, after.Retries)
			assert.NotEmpty(t, o.lines(`msg="httpretry: retry not sent"`))
			break
		}
		require.True(t, found, "no call had its retry refused")
	})
}
