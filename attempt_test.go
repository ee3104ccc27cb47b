package httpretry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// ctxBody fails reads once its request's context is done, as net/http's
// response bodies do.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *ctxBody) Close() error { return nil }

// TestResponseRacingAttemptTimeout: a response that arrives as
// AttemptTimeout fires is either counted as timed out (and retried as one)
// or returned with a body that can be read in full; never returned with a
// body that its cancelled context has already killed.
func TestResponseRacingAttemptTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first func(req *http.Request)
	}{
		// Base hands back a response just after the timeout cancelled the
		// attempt, as a socket read that completed at that instant does.
		{"answer after the timer", func(req *http.Request) { <-req.Context().Done() }},
		// Base answers at the very instant the timer fires; either may win.
		{"answer with the timer", func(*http.Request) { time.Sleep(time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 {
						tc.first(req)
					}
					return &http.Response{StatusCode: 200, Body: &ctxBody{req.Context(), strings.NewReader("payload")}}, nil
				})
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
