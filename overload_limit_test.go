package httpretry_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// gate is a Base that holds every request until it is let go, or its
// context ends, and answers 200.
type gate struct {
	mu      sync.Mutex
	waiting []chan struct{}
	sent    int
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.waiting = append(g.waiting, ch)
	g.sent++
	g.mu.Unlock()
	select {
	case <-ch:
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	case <-req.Context().Done():
		return nil, context.Cause(req.Context())
	}
}

// release lets the oldest request held go.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.waiting[0])
	g.waiting = g.waiting[1:]
}

func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent
}

// TestConcurrencyLimitWaitingRoom: over the limit, attempts wait in a FIFO
// room as large as LimitQueue, each for as long as its context allows; one
// that finds the room full, or whose context ends first, is refused with
// ErrConcurrencyLimit, having sent nothing.
func TestConcurrencyLimitWaitingRoom(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := &gate{}
		tr := &httpretry.Transport{Base: g, Policy: httpretry.Policy{
			Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 2, LimitQueue: 2}}}
		o := watch(tr)
		errs := make(chan error, 5)
		send := func(ctx context.Context) {
			go func() {
				resp, err := tr.RoundTrip(get(t, ctx))
				if err == nil {
					resp.Body.Close()
				}
				errs <- err
			}()
			synctest.Wait()
		}
		send(t.Context()) // A, in flight
		send(t.Context()) // B, in flight
		short, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		send(short)       // C waits, until its deadline
		send(t.Context()) // D waits
		send(t.Context()) // E finds the room full
		requireLocalRefusal(t, <-errs, httpretry.ErrConcurrencyLimit, httpretry.StopConcurrencyLimit)
		s := statsOf(t, tr, "api.example.com:443")
		assert.Equal(t, [4]int{2, 2, 2}, [4]int{s.Limit.Limit, s.Limit.InFlight, s.Limit.Waiting}, "limit, in flight, waiting")
		assert.Equal(t, 2, g.count())

		time.Sleep(time.Second)
		err := <-errs
		requireLocalRefusal(t, err, httpretry.ErrConcurrencyLimit, httpretry.StopConcurrencyLimit)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline ended the wait")

		g.release() // A answers; D takes its slot
		require.NoError(t, <-errs)
		synctest.Wait()
		assert.Equal(t, 3, g.count())
		g.release()
		g.release()
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)

		assert.Len(t, o.attempts, 3, "one OnAttempt per attempt Base saw")
		assert.Equal(t, map[httpretry.StopReason]int{httpretry.StopSuccess: 3, httpretry.StopConcurrencyLimit: 2}, o.stops())
		assert.Len(t, o.lines("stop=\"concurrency limit reached\""), 2)
		s = statsOf(t, tr, "api.example.com:443")
		assert.Equal(t, [4]int{2, 0, 0}, [4]int{s.Limit.Limit, s.Limit.InFlight, s.Limit.Waiting}, "limit, in flight, waiting")
		assert.Equal(t, int64(2), s.Limit.Refusals)
	})
}

// TestConcurrencyLimitFailFast: without a waiting room, an attempt over
// the limit is refused at once; a refused retry ends the call with the
// answer in hand and its budget charge given back.
func TestConcurrencyLimitFailFast(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := &gate{}
		fails := httpretrytest.NewScript(httpretrytest.Status(503))
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/slow" {
				return g.RoundTrip(req)
			}
			return fails.RoundTrip(req)
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(time.Second),
			Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 1, LimitQueue: -1}}}
		o := watch(tr)

		got := make(chan *http.Response, 1)
		go func() {
			resp, err := tr.RoundTrip(get(t, t.Context())) // 503, then a retry after 1 s
			assert.NoError(t, err)
			got <- resp
		}()
		time.Sleep(500 * time.Millisecond)
		slow, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://api.example.com/slow", nil)
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := tr.RoundTrip(slow) // holds the only slot
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
		resp := <-got // the retry found no slot
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		resp.Body.Close()
		assert.Len(t, fails.Requests(), 1)
		s := statsOf(t, tr, "api.example.com:443")
		assert.Equal(t, s.Budget.Capacity, s.Budget.Available, "the retry's charge was given back")
		assert.Zero(t, s.Retries)

		_, err = tr.RoundTrip(get(t, t.Context()))
		requireLocalRefusal(t, err, httpretry.ErrConcurrencyLimit, httpretry.StopConcurrencyLimit)
		g.release()
		<-done
		assert.Len(t, o.attempts, 2)
		assert.Equal(t, map[httpretry.StopReason]int{httpretry.StopSuccess: 1, httpretry.StopConcurrencyLimit: 2}, o.stops())
		assert.Len(t, o.lines(`msg="httpretry: retry not sent"`), 1)
		assert.Len(t, o.lines(`msg="httpretry: request not sent"`), 1)
	})
}

// TestConcurrencyLimitSlotReleasedOnEveryPath: an attempt's slot is given
// back when its answer's header arrives (not when the caller closes the
// body), when it fails or times out, when PrepareRetry or the breaker
// refuses it after admission, and when a hedge that lost returns in the
// background.
func TestConcurrencyLimitSlotReleasedOnEveryPath(t *testing.T) {
	t.Parallel()
	limit := httpretry.OverloadPolicy{Limit: true, LimitMax: 1, LimitQueue: -1}
	inFlight := func(t *testing.T, tr *httpretry.Transport) int {
		return statsOf(t, tr, "api.example.com:443").Limit.InFlight
	}
	t.Run("body handed to the caller", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(200)), Policy: httpretry.Policy{Overload: limit}}
			first, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			assert.Zero(t, inFlight(t, tr), "the slot is not held while the body is read")
			second, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err, "a limit of one still admits the next")
			first.Body.Close()
			second.Body.Close()
		})
	})
	t.Run("errors and timeouts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := &gate{}
			fake := httpretrytest.NewScript(httpretrytest.Fail(errBoom))
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 {
					return g.RoundTrip(req) // times out
				}
				return fake.RoundTrip(req)
			})
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{AttemptTimeout: time.Second, MaxAttempts: 2,
				Backoff: backoff.Constant(0), Overload: limit,
				Classify: func(*http.Request, *http.Response, error) httpretry.Class { return httpretry.ClassTransient }}}
			_, err := tr.RoundTrip(get(t, t.Context()))
			require.ErrorIs(t, err, errBoom)
			assert.Zero(t, inFlight(t, tr))
		})
	})
	t.Run("PrepareRetry refuses", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)), Policy: httpretry.Policy{Backoff: backoff.Constant(0),
				Overload:     limit,
				PrepareRetry: func(httpretry.Attempt, *http.Request) error { return errBoom }}}
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Zero(t, inFlight(t, tr))
		})
	})
	t.Run("the breaker refuses", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Fail(httpretrytest.DialRefused())), Policy: httpretry.Policy{
				Backoff: backoff.Constant(0), Overload: limit,
				Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 1}}}
			_, err := tr.RoundTrip(get(t, t.Context()))
			require.ErrorIs(t, err, httpretry.ErrCircuitOpen)
			_, err = tr.RoundTrip(get(t, t.Context()))
			requireLocalRefusal(t, err, httpretry.ErrCircuitOpen, httpretry.StopBreaker)
			assert.Zero(t, inFlight(t, tr))
		})
	})
	t.Run("a hedge that lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := &gate{}
			fast := httpretrytest.NewScript(httpretrytest.Status(200))
			base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if n, _ := httpretry.AttemptFromContext(req.Context()); n == 1 {
					return g.RoundTrip(req) // answers only when cancelled
				}
				return fast.RoundTrip(req)
			})
			tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{
				Hedge:    httpretry.HedgePolicy{Delay: 100 * time.Millisecond},
				Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 2}}}
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
			synctest.Wait() // the lost attempt is reaped
			assert.Zero(t, inFlight(t, tr))
			assert.Len(t, fast.Requests(), 1, "the hedge was sent")
		})
	})
}

// TestStatsLimitIsCurrent: Stats reports the limit the next attempt will
// find: an idle host's limit is back at its maximum 30 s after its last cut.
func TestStatsLimitIsCurrent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			MaxAttempts: 1,
			Overload:    httpretry.OverloadPolicy{Limit: true, LimitMax: 8},
		}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, tr.Stats(), 1)
		cut := tr.Stats()[0].Limit.Limit
		assert.Less(t, cut, 8, "a 503 cut the limit")
		time.Sleep(31 * time.Second)
		assert.Equal(t, 8, tr.Stats()[0].Limit.Limit, "idle past the forget time: back at the maximum")
	})
}
