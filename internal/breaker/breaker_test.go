package breaker

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func attempt(t *testing.T, b *Breaker, o Outcome) error {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		return err
	}
	done(o)
	return nil
}

// TestTripRules: the breaker opens after ConsecutiveFailures in a row, or
// once failures reach FailureRatio of at least MinRequests; excluded
// outcomes count for neither.
func TestTripRules(t *testing.T) {
	t.Parallel()
	b := New("h", Config{ConsecutiveFailures: 3, Window: time.Minute, OpenFor: time.Minute})
	for range 10 {
		require.NoError(t, attempt(t, b, Excluded))
	}
	require.NoError(t, attempt(t, b, Failure))
	require.NoError(t, attempt(t, b, Failure))
	assert.False(t, b.IsOpen())
	require.NoError(t, attempt(t, b, Failure))
	assert.True(t, b.IsOpen())
	assert.ErrorIs(t, attempt(t, b, Success), ErrOpen)

	r := New("h", Config{FailureRatio: 0.5, MinRequests: 4, Window: time.Minute, OpenFor: time.Minute})
	for _, o := range []Outcome{Success, Failure, Success} {
		require.NoError(t, attempt(t, r, o))
	}
	assert.False(t, r.IsOpen(), "fewer than MinRequests")
	require.NoError(t, attempt(t, r, Failure))
	assert.True(t, r.IsOpen(), "2 of 4, as a failure is counted")
}

// TestHalfOpenTrials: after OpenFor, HalfOpenAttempts trials pass, more are
// refused with ErrTrials, and that many successes close the breaker; an
// excluded trial gives its place back.
func TestHalfOpenTrials(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := New("h", Config{ConsecutiveFailures: 1, Window: time.Minute, OpenFor: time.Second, HalfOpenAttempts: 1})
		require.NoError(t, attempt(t, b, Failure))
		time.Sleep(time.Second + time.Millisecond)
		done, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		assert.True(t, errors.Is(err, ErrTrials))
		done(Excluded)
		require.NoError(t, attempt(t, b, Success))
		s, _ := b.State()
		assert.Equal(t, Closed, s)
		assert.True(t, b.AtRest())
	})
}

// TestNil: a nil breaker admits everything and is at rest.
func TestNil(t *testing.T) {
	t.Parallel()
	var b *Breaker
	done, err := b.Allow()
	assert.NoError(t, err)
	assert.Nil(t, done)
	assert.False(t, b.IsOpen())
	assert.True(t, b.AtRest())
	assert.Zero(t, b.OpenFor())
}

// TestHalfOpen: HalfOpen says when Allow admits trials only.
func TestHalfOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var none *Breaker
		assert.False(t, none.HalfOpen())
		b := New("h", Config{ConsecutiveFailures: 1, Window: time.Minute, OpenFor: time.Second, HalfOpenAttempts: 2})
		assert.False(t, b.HalfOpen())
		require.NoError(t, attempt(t, b, Failure))
		assert.False(t, b.HalfOpen(), "open")
		time.Sleep(time.Second + time.Millisecond)
		assert.True(t, b.HalfOpen())
		done1, err := b.Allow()
		require.NoError(t, err)
		done2, err := b.Allow()
		require.NoError(t, err)
		assert.True(t, b.HalfOpen(), "both trials out")
		_, err = b.Allow()
		assert.ErrorIs(t, err, ErrTrials)
		done1(Success)
		done2(Success)
		assert.False(t, b.HalfOpen(), "closed")
	})
}
