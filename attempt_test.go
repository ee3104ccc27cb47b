package httpretry_test

import (
	"io"
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

// TestResponseRacingAttemptTimeout: a response that arrives as
// AttemptTimeout fires is either counted as timed out (and retried as one)
// or returned with a body that can be read in full; never returned with a
// body that its cancelled context has already killed.
func TestResponseRacingAttemptTimeout(t *testing.T) {
	t.Parallel()
	// A Script's response bodies fail reads once their request's context
	// is done, as net/http's do.
	payload := httpretrytest.Respond(200, "payload")
	firstAttempt := func(req *http.Request) bool {
		n, _ := httpretry.AttemptFromContext(req.Context())
		return n == 1
	}
	for _, tc := range []struct {
		name  string
		first httpretrytest.Outcome
	}{
		// Base hands back a response just after the timeout cancelled the
		// attempt, as a socket read that completed at that instant does.
		{"answer after the timer", payload.After(time.Hour).RespondOnCancel()},
		// Base answers at the very instant the timer fires; either may win.
		{"answer with the timer", payload.After(time.Second).RespondOnCancel()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := httpretrytest.NewScript(payload).On(firstAttempt, tc.first)
				var attempts []httpretry.Attempt
				tr := &httpretry.Transport{Base: base,
					Policy:    httpretry.Policy{AttemptTimeout: time.Second, Backoff: backoff.Constant(0), NewBudget: httpretry.NoBudget},
					OnAttempt: func(a httpretry.Attempt) { attempts = append(attempts, a) }}
				for range 200 {
					attempts = attempts[:0]
					resp, err := tr.RoundTrip(get(t, t.Context()))
					require.NoError(t, err)
					body, err := io.ReadAll(resp.Body)
					require.NoError(t, err, "the returned body is readable")
					assert.Equal(t, "payload", string(body))
					resp.Body.Close()
					if len(attempts) == 2 {
						assert.ErrorIs(t, attempts[0].Err, httpretry.ErrAttemptTimeout, "retried as a timeout")
					}
				}
			})
		})
	}
}
