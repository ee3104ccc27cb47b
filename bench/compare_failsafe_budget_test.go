package bench

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldRetries is a server for calls numbered by an X-Call header. Every
// first attempt waits until the test answers it with a 503; every retry is
// reported on retries and then held until release is closed, when it
// answers 200.
type heldRetries struct {
	*httptest.Server
	firsts  chan int        // a call's first attempt arrived
	answer  []chan struct{} // per call: answer its first attempt
	retries chan int        // a call's retry arrived
	release chan struct{}   // answer every held retry
	mu      sync.Mutex
	seen    map[int]int // attempts per call
}

func newHeldRetries(t *testing.T, calls int) *heldRetries {
	s := &heldRetries{
		firsts: make(chan int, calls), retries: make(chan int, calls),
		answer: make([]chan struct{}, calls), release: make(chan struct{}), seen: map[int]int{},
	}
	for i := range s.answer {
		s.answer[i] = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, _ := strconv.Atoi(r.Header.Get("X-Call"))
		s.mu.Lock()
		s.seen[call]++
		n := s.seen[call]
		s.mu.Unlock()
		if n == 1 {
			s.firsts <- call
			<-s.answer[call]
			w.WriteHeader(503)
			return
		}
		s.retries <- call
		<-s.release
	}))
	t.Cleanup(s.Close)
	return s
}

// runBudgeted starts calls concurrent GETs through one failsafehttp retry
// policy (3 retries, no waits) with failsafe-go's default budget, waits
// until every first attempt is in flight, then answers them with a 503 one
// at a time, each time waiting until that call's retry is admitted (and
// held at the server) or refused. It returns how many retries were
// admitted and how many calls the budget refused.
func runBudgeted(t *testing.T, calls int) (admitted, refused int) {
	srv := newHeldRetries(t, calls)
	rt := failsafehttp.NewRoundTripper(newBare(),
		failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBudget(budget.New()).Build())
	done := make(chan error, calls)
	for i := range calls {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("X-Call", strconv.Itoa(i))
			resp, err := rt.RoundTrip(req)
			if err == nil {
				closeResp(resp)
			}
			var ee retrypolicy.ExceededError
			if errors.As(err, &ee) {
				if last, ok := ee.LastResult.(*http.Response); ok {
					closeResp(last)
				}
			}
			done <- err
		}()
	}
	for range calls {
		<-srv.firsts
	}
	for i := range calls {
		close(srv.answer[i])
		select {
		case <-srv.retries:
			admitted++
		case err := <-done:
			require.ErrorIs(t, err, budget.ErrExceeded, "call %d", i)
			refused++
		}
	}
	close(srv.release)
	for range admitted {
		require.NoError(t, <-done)
	}
	return admitted, refused
}

// TestCompareFailsafeBudget: failsafe-go v0.9.8's budget.New() (maxRate
// 0.2, minConcurrency 3) limits retries in flight at once, relative to
// executions in flight (retries included), not retries over time. A
// retry is admitted while fewer than 3 are in flight, or while retries in
// flight ÷ executions in flight is at most 0.2 before it: with 20 calls in
// flight, 6 retries run at once (6/26 > 0.2 refuses the 7th) and 14 calls
// fail with budget.ErrExceeded; with 5 calls, 3 (the floor). One call at a
// time, a server that only answers 503 gets every retry: 40 calls, 160
// attempts, as without a budget.
func TestCompareFailsafeBudget(t *testing.T) {
	for _, c := range []struct{ calls, admitted int }{{20, 6}, {5, 3}} {
		t.Run(fmt.Sprintf("%d calls in flight", c.calls), func(t *testing.T) {
			admitted, refused := runBudgeted(t, c.calls)
			assert.Equal(t, c.admitted, admitted, "retries admitted")
			assert.Equal(t, c.calls-c.admitted, refused, "calls refused")
		})
	}
	t.Run("40 calls one at a time", func(t *testing.T) {
		srv := newScripted(t, 503)
		rt := failsafehttp.NewRoundTripper(newBare(),
			failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBudget(budget.New()).Build())
		for range 40 {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			_, err := rt.RoundTrip(req)
			var ee retrypolicy.ExceededError
			require.ErrorAs(t, err, &ee, "retries ran out, the budget never refused")
			closeResp(ee.LastResult.(*http.Response))
		}
		assert.Equal(t, 160, srv.received())
	})
}
