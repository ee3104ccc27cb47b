package backoff_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/backoff"
)

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
		assert.True(t, backoff.Fits(ctx, 500*time.Millisecond))
		assert.True(t, backoff.Fits(ctx, time.Second-1))
		assert.False(t, backoff.Fits(ctx, time.Second), "a wait ending at the deadline leaves no time to use")
	})
	require.ErrorIs(t, backoff.ErrDeadline, context.DeadlineExceeded)
}
