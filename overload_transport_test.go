package httpretry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
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

// observed records what a Transport reports: every OnAttempt, every
// OnCall, and its log.
type observed struct {
	mu       sync.Mutex
	attempts []httpretry.Attempt
	calls    []httpretry.Call
	log      bytes.Buffer
}

// watch sets t's hooks and Logger to record into a new observed.
func watch(t *httpretry.Transport) *observed {
	o := &observed{}
	t.OnAttempt = func(a httpretry.Attempt) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.attempts = append(o.attempts, a)
	}
	t.OnCall = func(c httpretry.Call) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.calls = append(o.calls, c)
	}
	t.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &o.mu, w: &o.log}, nil))
	return o
}

// stops counts the calls by why they stopped.
func (o *observed) stops() map[httpretry.StopReason]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := map[httpretry.StopReason]int{}
	for _, c := range o.calls {
		n[c.Stop]++
	}
	return n
}

func (o *observed) lines(substr string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for l := range strings.SplitSeq(o.log.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// statsOf returns the Stats entry of host, failing if there is none.
func statsOf(t *testing.T, tr *httpretry.Transport, host string) httpretry.HostStats {
	t.Helper()
	for _, s := range tr.Stats() {
		if s.Host == host {
			return s
		}
	}
	t.Fatalf("no state for %s in %+v", host, tr.Stats())
	return httpretry.HostStats{}
}

// requireLocalRefusal checks err is a refusal of the call's first attempt
// by a local control: nothing sent, the sentinel and stop reason.
func requireLocalRefusal(t *testing.T, err error, sentinel error, reason httpretry.StopReason) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Attempts, "nothing was sent")
	assert.Equal(t, reason, re.Reason)
}

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
		assert.True(t, s.HasThrottle)
		assert.InDelta(t, 0.9, s.ThrottleProbability, 1e-9)
		assert.Equal(t, int64(refused), s.ThrottleRefusals)
		assert.Equal(t, int64(sent), s.Attempts)
		assert.False(t, s.HasLimit)
		assert.False(t, s.HasPacing)
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
			assert.Equal(t, before.BudgetAvailable, after.BudgetAvailable, "the retry's cost was given back")
			assert.Equal(t, before.Retries, after.Retries)
			assert.NotEmpty(t, o.lines(`msg="httpretry: retry not sent"`))
			break
		}
		require.True(t, found, "no call had its retry refused")
	})
}

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
		assert.Equal(t, [4]int{2, 2, 2}, [4]int{s.Limit, s.InFlight, s.Waiting}, "limit, in flight, waiting")
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
		assert.Equal(t, [4]int{2, 0, 0}, [4]int{s.Limit, s.InFlight, s.Waiting}, "limit, in flight, waiting")
		assert.Equal(t, int64(2), s.LimitRefusals)
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
		assert.Equal(t, s.BudgetCapacity, s.BudgetAvailable, "the retry's charge was given back")
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
		return statsOf(t, tr, "api.example.com:443").InFlight
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

// quota answers 200 with X-RateLimit-Remaining and X-RateLimit-Reset (in
// seconds) as set, and counts requests.
type quota struct {
	mu        sync.Mutex
	remaining int
	reset     int
	sent      []time.Time
}

func (q *quota) RoundTrip(req *http.Request) (*http.Response, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, time.Now())
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
	h.Set("X-RateLimit-Reset", strconv.Itoa(q.reset))
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: req}, nil
}

var paceHints = httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset", RemainingHeader: "X-RateLimit-Remaining"}

// TestPacingWaitsForTheReset: once the host says its quota is spent, the
// next request waits for the reset before it is sent, up to 10 % later,
// within MaxRetryAfter and the caller's deadline; a reset further away is
// refused with ErrRateLimited at once, as is any under PaceFailFast.
func TestPacingWaitsForTheReset(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, o httpretry.OverloadPolicy, maxRetryAfter time.Duration) (*httpretry.Transport, *quota, *observed) {
		q := &quota{remaining: 0, reset: 30}
		tr := &httpretry.Transport{Base: q, Policy: httpretry.Policy{Overload: o, Hints: paceHints, MaxRetryAfter: maxRetryAfter}}
		obs := watch(tr)
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		return tr, q, obs
	}
	pace := httpretry.OverloadPolicy{Pace: true}
	t.Run("waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, q, o := setup(t, pace, 0)
			s := statsOf(t, tr, "api.example.com:443")
			assert.True(t, s.HasPacing)
			assert.Equal(t, int64(0), s.PaceRemaining)
			assert.Equal(t, 30*time.Second, time.Until(s.PacedUntil))
			start := time.Now()
			resp, err := tr.RoundTrip(get(t, t.Context()))
			require.NoError(t, err)
			resp.Body.Close()
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, 30*time.Second)
			assert.LessOrEqual(t, took, 33*time.Second)
			require.Len(t, q.sent, 2)
			assert.Equal(t, q.sent[1], time.Now(), "the wait came before the attempt")
			assert.Len(t, o.attempts, 2)
			assert.Equal(t, map[httpretry.StopReason]int{httpretry.StopSuccess: 2}, o.stops())
		})
	})
	refusedAtOnce := func(t *testing.T, tr *httpretry.Transport, ctx context.Context) {
		start := time.Now()
		_, err := tr.RoundTrip(get(t, ctx))
		requireLocalRefusal(t, err, httpretry.ErrRateLimited, httpretry.StopRateLimited)
		assert.Contains(t, err.Error(), "resets in 30s")
		assert.Equal(t, start, time.Now(), "no wait")
		assert.Equal(t, int64(1), statsOf(t, tr, "api.example.com:443").PaceRefusals)
	}
	t.Run("the reset is past the caller's deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, q, o := setup(t, pace, 0)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			refusedAtOnce(t, tr, ctx)
			assert.Len(t, q.sent, 1)
			assert.Len(t, o.attempts, 1)
			assert.Equal(t, httpretry.StopRateLimited, o.calls[1].Stop)
			assert.Len(t, o.lines("stop=\"rate limit spent\""), 1)
		})
	})
	t.Run("the reset is past MaxRetryAfter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, _, _ := setup(t, pace, 10*time.Second)
			refusedAtOnce(t, tr, t.Context())
		})
	})
	t.Run("fail fast", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, _, _ := setup(t, httpretry.OverloadPolicy{Pace: true, PaceFailFast: true}, 0)
			refusedAtOnce(t, tr, t.Context())
		})
	})
	t.Run("the caller cancels the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, q, o := setup(t, pace, 0)
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(5*time.Second, cancel)
			_, err := tr.RoundTrip(get(t, ctx))
			require.ErrorIs(t, err, context.Canceled)
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, httpretry.StopContext, re.Reason)
			assert.Zero(t, re.Attempts)
			assert.Len(t, q.sent, 1)
			assert.Equal(t, httpretry.StopContext, o.calls[1].Stop)
		})
	})
	t.Run("requests left are sent at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := &quota{remaining: 3, reset: 30}
			tr := &httpretry.Transport{Base: q, Policy: httpretry.Policy{Overload: pace, Hints: paceHints}}
			for range 3 {
				resp, err := tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
			}
			assert.Equal(t, q.sent[0], q.sent[2], "no wait while the quota lasts")
		})
	})
}

// TestPacingByRetryAfterAndRateLimit: a 429's Retry-After paces the host's
// later requests; so does the RateLimit field, with its remaining count.
func TestPacingByRetryAfterAndRateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		first  httpretrytest.Outcome
		paused time.Duration
	}{
		{"429 with Retry-After", httpretrytest.RetryAfter(429, "5"), 5 * time.Second},
		{"RateLimit, nothing left", httpretrytest.Status(200).Header("RateLimit", `"default";r=0;t=7`), 7 * time.Second},
		{"RateLimit, some left", httpretrytest.Status(200).Header("RateLimit", `"default";r=4;t=7`), 0},
		{"a 503's Retry-After is not a quota", httpretrytest.RetryAfter(503, "5"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := httpretrytest.NewScript(tc.first, httpretrytest.Status(200))
				tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{Pace: true}}}
				resp, err := tr.RoundTrip(get(t, httpretry.WithoutRetries(t.Context())))
				require.NoError(t, err)
				resp.Body.Close()
				start := time.Now()
				resp, err = tr.RoundTrip(get(t, t.Context()))
				require.NoError(t, err)
				resp.Body.Close()
				waited := time.Since(start)
				assert.GreaterOrEqual(t, waited, tc.paused)
				assert.LessOrEqual(t, waited, tc.paused+tc.paused/10)
			})
		})
	}
}

// TestOverloadPolicyIsPerHost: the controls are set per host, inherited,
// turned off with Disabled, and cannot be set on a key with a path or
// changed per request; a host with one on gets state at its first request.
func TestOverloadPolicyIsPerHost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(200)),
			Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{Throttle: true}},
			Hosts: map[string]httpretry.Policy{
				"limited.example.com": {Overload: httpretry.OverloadPolicy{Limit: true}},
				"off.example.com":     {Overload: httpretry.OverloadPolicy{Disabled: true}},
			}}
		require.NoError(t, tr.Validate())
		for _, host := range []string{"api.example.com", "limited.example.com", "off.example.com"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		stats := tr.Stats()
		require.Len(t, stats, 2, "state at the first request for hosts with a control on, none for the other")
		assert.True(t, stats[0].HasThrottle && !stats[0].HasLimit, "api.example.com inherits throttling")
		assert.True(t, stats[1].HasLimit && !stats[1].HasThrottle, "limited.example.com replaces it")
		assert.Equal(t, 1000, stats[1].Limit)

		ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { p.Overload.Throttle = false })
		_, err := tr.RoundTrip(get(t, ctx))
		require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
		assert.ErrorContains(t, err, "WithPolicy.Overload: is per host")
	})
}

func TestOverloadPolicyValidation(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{
		Policy: httpretry.Policy{Overload: httpretry.OverloadPolicy{Throttle: true, ThrottleK: 0.5, ThrottleWindow: -time.Second}},
		Hosts: map[string]httpretry.Policy{
			"a.example.com":    {Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: -1, LimitMin: -2}},
			"b.example.com":    {Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: 10, LimitMin: 20}},
			"c.example.com":    {Overload: httpretry.OverloadPolicy{ThrottleK: 1.1, LimitQueue: 5, PaceFailFast: true}},
			"d.example.com/v1": {Overload: httpretry.OverloadPolicy{Pace: true}},
			"e.example.com":    {Hints: httpretry.HintPolicy{RemainingHeader: "X-RateLimit-Remaining"}},
			"f.example.com":    {Hints: httpretry.HintPolicy{ResetHeader: "X-Reset", RemainingHeader: "bad header"}},
			"ok.example.com":   {Overload: httpretry.OverloadPolicy{Disabled: true, ThrottleK: 1.1}},
		},
	}
	err := tr.Validate()
	require.Error(t, err)
	for _, want := range []string{
		`Transport.Policy.Overload.ThrottleK: 0.5 is not a finite number of at least 1`,
		`Transport.Policy.Overload.ThrottleWindow: -1s is negative`,
		`Transport.Hosts["a.example.com"].Overload.LimitMax: -1 is negative`,
		`Transport.Hosts["a.example.com"].Overload.LimitMin: -2 is negative`,
		`Transport.Hosts["b.example.com"].Overload.LimitMin: 20 is above LimitMax (10)`,
		`Transport.Hosts["c.example.com"].Overload.ThrottleK: is set but Throttle is off`,
		`Transport.Hosts["c.example.com"].Overload.LimitQueue: is set but Limit is off`,
		`Transport.Hosts["c.example.com"].Overload.PaceFailFast: is set but Pace is off`,
		`Transport.Hosts["d.example.com/v1"].Overload: is per host`,
		`Transport.Hosts["e.example.com"].Hints.RemainingHeader: is read only with ResetHeader`,
		`Transport.Hosts["f.example.com"].Hints.RemainingHeader: "bad header" is not a valid header name`,
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 11)
	assert.NotContains(t, err.Error(), "ok.example.com")
}

// TestOverloadStateIsBounded: hosts whose controls are back at rest are
// dropped, so memory follows the hosts in trouble, not every host ever
// called; a host still throttled keeps its state.
func TestOverloadStateIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Status(200))
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Host == "sick.example.com" {
				return nil, errors.Join(httpretry.ErrAttemptTimeout) // a timeout: overload
			}
			return fake.RoundTrip(req)
		})
		tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{MaxAttempts: 1,
			Overload: httpretry.OverloadPolicy{Throttle: true, Limit: true, Pace: true, ThrottleWindow: 10 * time.Minute}}}
		call := func(host string) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/", nil)
			require.NoError(t, err)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		for i := range 500 {
			call("h" + strconv.Itoa(i) + ".example.com")
		}
		call("sick.example.com")
		assert.Len(t, tr.Stats(), 501)
		time.Sleep(2 * time.Minute)
		call("new.example.com") // a new host's state sweeps the table
		var hosts []string
		for _, s := range tr.Stats() {
			hosts = append(hosts, s.Host)
		}
		assert.Equal(t, []string{"new.example.com:443", "sick.example.com:443"}, hosts)
	})
}
