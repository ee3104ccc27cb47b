package httpretry_test

// Issue 19, defect 5, in a file of its own: on today's code a panic on one
// of the goroutines hedging runs Base on cannot be recovered by anyone, and
// it ends the whole test binary. Run the other interactions tests with
// -skip TestHedgedPanic until it is fixed.

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Defect 5: with hedging on, every attempt of a round runs Base on a
// goroutine of its own, beyond the caller's recover and http.Server's.
// → A panic in Base, in the first attempt or in a hedge, is caught there
// and raised again on the caller's goroutine, where a recover around
// RoundTrip sees it; the round's other attempts are cancelled at once (not
// at the call's deadline) and the bodies they return are closed; the
// process does not crash.
func TestHedgedPanicReachesTheCaller(t *testing.T) {
	t.Parallel()
	hedging := httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: 10 * time.Millisecond}}
	t.Run("in the first attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
				panic(errIxPanic)
			})
			tr := &httpretry.Transport{Base: base, Policy: hedging}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			v := ixPanicked(func() { tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://search.example.com/q", nil)) })
			assert.True(t, ixIsOurPanic(v), "the caller recovers the panic, got %v", v)
		})
	})
	t.Run("in a hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			late := httpretrytest.NewBody("late")
			var cancelledAt atomic.Int64 // fake-clock nanoseconds since the call began
			var start time.Time
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if n, _ := httpretry.AttemptFromContext(req.Context()); n > 1 {
					panic(errIxPanic)
				}
				<-req.Context().Done()
				cancelledAt.Store(int64(time.Since(start)))
				return ixRespBody(req, http.StatusOK, late), nil // a Base that answers even a cancelled request
			})
			tr := &httpretry.Transport{Base: base, Policy: hedging}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req := ixReq(t, ctx, http.MethodGet, "https://search.example.com/q", nil)
			start = time.Now()
			v := ixPanicked(func() { tr.RoundTrip(req) })
			require.True(t, ixIsOurPanic(v), "the caller recovers the panic, got %v", v)
			<-ctx.Done() // whatever happens, the first attempt has ended by now
			synctest.Wait()
			assert.Less(t, time.Duration(cancelledAt.Load()), time.Second, "the first attempt was cancelled with the round, not at the deadline")
			assert.Equal(t, 1, late.Closes(), "the first attempt's late answer was closed")
		})
	})
}
