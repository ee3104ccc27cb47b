package backoff_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/backoff"
)

var (
	errFlaky = errors.New("flaky")
	errFatal = errors.New("fatal")
)

// flaky is an op that fails its first failures calls with errFlaky, then
// succeeds with "ok". It records the fake-clock time of every attempt.
type flaky struct {
	failures int
	start    time.Time
	at       []time.Duration
}

func newFlaky(failures int) *flaky { return &flaky{failures: failures, start: time.Now()} }

func (f *flaky) op(context.Context) (string, error) {
	f.at = append(f.at, time.Since(f.start))
	if len(f.at) <= f.failures {
		return "", errFlaky
	}
	return "ok", nil
}

type notice struct {
	err   error
	retry int
	delay time.Duration
}

func TestRetryWaitSequence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     backoff.Options
		failures int
		want     []time.Duration // time.Since(start) at each attempt
	}{
		{"constant", backoff.Options{Strategy: backoff.Constant(time.Second), MaxAttempts: 5}, 3,
			[]time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}},
		{"constant zero", backoff.Options{Strategy: backoff.Constant(0)}, 3, []time.Duration{0, 0, 0, 0}},
		{"linear", backoff.Options{Strategy: backoff.Linear{Base: 100 * ms, Step: 200 * ms}}, 3,
			[]time.Duration{0, 100 * ms, 400 * ms, 900 * ms}},
		{"exponential capped, unlimited attempts",
			backoff.Options{Strategy: backoff.Exponential{Base: 100 * ms, Cap: 300 * ms}, MaxAttempts: -1}, 5,
			[]time.Duration{0, 100 * ms, 300 * ms, 600 * ms, 900 * ms, 1200 * ms}},
		{"success at once", backoff.Options{Strategy: backoff.Constant(time.Hour)}, 0, []time.Duration{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := newFlaky(tt.failures)
				got, err := backoff.Retry(t.Context(), tt.opts, f.op)
				require.NoError(t, err)
				assert.Equal(t, "ok", got)
				assert.Equal(t, tt.want, f.at)
			})
		})
	}
}

func TestRetryNotify(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		errs := []error{errors.New("e1"), errors.New("e2"), errors.New("e3"), errors.New("e4")}
		var got []notice
		var notifiedAt []time.Duration
		opts := backoff.Options{
			Strategy: backoff.Linear{Base: time.Second, Step: time.Second},
			Notify: func(err error, retry int, delay time.Duration) {
				got = append(got, notice{err, retry, delay})
				notifiedAt = append(notifiedAt, time.Since(start))
			},
		}
		calls := 0
		v, err := backoff.Retry(t.Context(), opts, func(context.Context) (int, error) {
			calls++
			return calls, errs[calls-1]
		})
		assert.Equal(t, 4, v, "the last attempt's value is returned")
		require.ErrorIs(t, err, errs[3])
		assert.Equal(t, []notice{{errs[0], 1, time.Second}, {errs[1], 2, 2 * time.Second}, {errs[2], 3, 3 * time.Second}}, got)
		assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second}, notifiedAt, "Notify runs before each wait")
	})
}

func TestRetryMaxAttempts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxAttempts int
		want        int
	}{
		{"zero means default", 0, backoff.DefaultMaxAttempts},
		{"one disables retries", 1, 1},
		{"three", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := newFlaky(100)
				opts := backoff.Options{Strategy: backoff.Constant(time.Second), MaxAttempts: tt.maxAttempts}
				_, err := backoff.Retry(t.Context(), opts, f.op)
				var e *backoff.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tt.want, e.Attempts)
				assert.Equal(t, errFlaky, e.Err)
				require.NoError(t, e.Cause)
				require.ErrorIs(t, err, errFlaky)
				assert.Len(t, f.at, tt.want)
				assert.Equal(t, time.Duration(tt.want-1)*time.Second, time.Since(f.start), "no wait after the last attempt")
			})
		})
	}
}

func TestRetryPermanent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		_, err := backoff.Retry(t.Context(), backoff.Options{Strategy: backoff.Constant(time.Second), MaxAttempts: -1},
			func(context.Context) (struct{}, error) {
				calls++
				if calls == 2 {
					return struct{}{}, backoff.Permanent(errFatal)
				}
				return struct{}{}, errFlaky
			})
		var e *backoff.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, 2, e.Attempts)
		assert.Equal(t, errFatal, e.Err, "the Permanent marker is removed")
		require.ErrorIs(t, err, errFatal)
		assert.False(t, backoff.IsPermanent(err))
		assert.Equal(t, time.Second, time.Since(start), "stopped at once, no wait after it")
	})

	t.Run("marker", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, backoff.Permanent(nil))
		p := backoff.Permanent(errFatal)
		assert.True(t, backoff.IsPermanent(p))
		assert.True(t, backoff.IsPermanent(errors.Join(errFlaky, p)))
		assert.False(t, backoff.IsPermanent(errFatal))
		require.ErrorIs(t, p, errFatal)
		assert.Equal(t, "fatal", p.Error())
	})
}

func TestRetryCancelMidWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFlaky(100)
		notified := 0
		opts := backoff.Options{
			Strategy: backoff.Constant(time.Hour),
			Notify:   func(error, int, time.Duration) { notified++ },
		}
		done := make(chan error)
		go func() {
			_, err := backoff.Retry(ctx, opts, f.op)
			done <- err
		}()
		time.Sleep(10 * time.Second) // fake clock: Retry is now in its first hour-long wait
		synctest.Wait()
		assert.Equal(t, 1, notified)
		cancel()
		err := <-done
		assert.Equal(t, 10*time.Second, time.Since(f.start), "returned at once on cancel")
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, errFlaky)
		var e *backoff.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, 1, e.Attempts)
		assert.Equal(t, errFlaky, e.Err)
		assert.Equal(t, context.Canceled, e.Cause)
	})
}

func TestRetryCancelCause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errShutdown := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(t.Context())
		_, err := backoff.Retry(ctx, backoff.Options{Strategy: backoff.Constant(time.Second)},
			func(context.Context) (int, error) {
				cancel(errShutdown)
				return 0, errFlaky
			})
		require.ErrorIs(t, err, errShutdown)
		require.ErrorIs(t, err, errFlaky)
	})
}

func TestRetryContextDoneBeforeFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	_, err := backoff.Retry(ctx, backoff.Options{}, func(context.Context) (int, error) {
		calls++
		return 0, nil
	})
	assert.Zero(t, calls)
	var e *backoff.Error
	require.ErrorAs(t, err, &e)
	assert.Zero(t, e.Attempts)
	require.NoError(t, e.Err)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "backoff: stopped after 0 attempts: context canceled", err.Error())
}

func TestRetryDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		timeout  time.Duration
		wait     time.Duration
		attempts int
	}{
		{"shorter than first wait", 5 * time.Second, 10 * time.Second, 1},
		{"room for two waits", 5 * time.Second, 2 * time.Second, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
				defer cancel()
				f := newFlaky(100)
				var notified int
				opts := backoff.Options{
					Strategy:    backoff.Constant(tt.wait),
					MaxAttempts: -1,
					Notify:      func(error, int, time.Duration) { notified++ },
				}
				_, err := backoff.Retry(ctx, opts, f.op)
				require.ErrorIs(t, err, backoff.ErrDeadline)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.ErrorIs(t, err, errFlaky)
				var e *backoff.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tt.attempts, e.Attempts)
				assert.Equal(t, tt.attempts-1, notified, "no Notify for a wait that is not started")
				assert.Equal(t, time.Duration(tt.attempts-1)*tt.wait, time.Since(f.start),
					"the wait that would pass the deadline is not started")
				require.NoError(t, ctx.Err(), "returned before the deadline")
			})
		})
	}
}

func TestRetryDecorrelatedFeedsPrev(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := backoff.Decorrelated{Base: time.Second, Cap: time.Hour}
		var delays []time.Duration
		opts := backoff.Options{
			Strategy:    s,
			MaxAttempts: 12,
			Rand:        rand.New(rand.NewPCG(3, 4)),
			Notify:      func(_ error, _ int, d time.Duration) { delays = append(delays, d) },
		}
		_, err := backoff.Retry(t.Context(), opts, newFlaky(100).op)
		require.ErrorIs(t, err, errFlaky)
		require.Len(t, delays, 11)
		prev := s.Base
		for i, d := range delays {
			assert.GreaterOrEqual(t, d, s.Base, "retry %d", i+1)
			assert.LessOrEqual(t, d, 3*prev, "retry %d drew above 3·prev", i+1)
			prev = d
		}
	})
}

func TestRetryDefaultStrategy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(100)
		_, err := backoff.Retry(t.Context(), backoff.Options{Rand: rand.New(rand.NewPCG(1, 2))}, f.op)
		require.ErrorIs(t, err, errFlaky)
		require.Len(t, f.at, backoff.DefaultMaxAttempts)
		assert.LessOrEqual(t, time.Since(f.start), 700*ms, "three retries of Default wait at most 100+200+400 ms")
	})
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	for want, e := range map[string]*backoff.Error{
		"backoff: giving up after 3 attempts: flaky":                                                 {Attempts: 3, Err: errFlaky},
		"backoff: stopped after 2 attempts: context canceled (last error: flaky)":                    {Attempts: 2, Err: errFlaky, Cause: context.Canceled},
		"backoff: stopped after 0 attempts: context deadline exceeded":                               {Cause: context.DeadlineExceeded},
		"backoff: stopped after 1 attempts: " + backoff.ErrDeadline.Error() + " (last error: flaky)": {Attempts: 1, Err: errFlaky, Cause: backoff.ErrDeadline},
	} {
		assert.Equal(t, want, e.Error())
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cancelled bool
		timeout   time.Duration // 0: no deadline
		d         time.Duration
		wantErr   error
		elapsed   time.Duration
	}{
		{"zero", false, 0, 0, nil, 0},
		{"negative", false, 0, -time.Second, nil, 0},
		{"full wait", false, 0, time.Second, nil, time.Second},
		{"already done", true, 0, time.Second, context.Canceled, 0},
		{"already done, zero", true, 0, 0, context.Canceled, 0},
		{"already done, negative", true, 0, -1, context.Canceled, 0},
		{"deadline fits", false, 2 * time.Second, time.Second, nil, time.Second},
		{"deadline too short", false, time.Second, 2 * time.Second, backoff.ErrDeadline, 0},
		{"deadline too short, zero wait fits", false, time.Second, 0, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tt.timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				if tt.cancelled {
					cancel()
				}
				start := time.Now()
				err := backoff.Wait(ctx, tt.d)
				if tt.wantErr == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tt.wantErr)
				}
				assert.Equal(t, tt.elapsed, time.Since(start))
			})
		})
	}
}

func TestWaitCancelled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errStop := errors.New("stop")
		ctx, cancel := context.WithCancelCause(t.Context())
		start := time.Now()
		time.AfterFunc(3*time.Second, func() { cancel(errStop) })
		err := backoff.Wait(ctx, time.Hour)
		require.ErrorIs(t, err, errStop, "Wait returns the context's cause")
		assert.Equal(t, 3*time.Second, time.Since(start))
	})
}

func TestFits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		assert.True(t, backoff.Fits(t.Context(), 1000*time.Hour), "no deadline")
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		assert.True(t, backoff.Fits(ctx, 500*ms))
		assert.True(t, backoff.Fits(ctx, time.Second-1))
		assert.False(t, backoff.Fits(ctx, time.Second), "a wait ending at the deadline leaves no time to use")
	})
	require.ErrorIs(t, backoff.ErrDeadline, context.DeadlineExceeded)
}
