package budget

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newBucket(capacity, retryCost, timeoutCost, credit int) *TokenBucket {
	b := new(TokenBucket)
	b.Init(capacity, retryCost, timeoutCost, credit)
	return b
}

func newRatio(ratio float64, length time.Duration, minPerSecond float64) *Ratio {
	b := new(Ratio)
	b.Init(ratio, length, minPerSecond)
	return b
}

func TestTokenBucketArithmetic(t *testing.T) {
	t.Parallel()
	b := newBucket(0, 0, 0, 0)
	require.Equal(t, 500, int(b.tokens.Load()), "starts full")

	// A total outage: 100 retries at 5 tokens, then none.
	allowed := 0
	for b.AllowRetry(false) {
		allowed++
	}
	assert.Equal(t, 100, allowed)
	assert.Equal(t, 0, int(b.tokens.Load()))

	// Five clean successes fund one retry.
	for range 4 {
		b.Succeeded(false, false)
	}
	assert.False(t, b.AllowRetry(false))
	b.Succeeded(false, false)
	assert.True(t, b.AllowRetry(false))
	assert.Equal(t, 0, int(b.tokens.Load()))

	// A retry that succeeds gets its cost back; a timeout retry costs 10.
	for range 20 {
		b.Succeeded(false, false)
	}
	assert.True(t, b.AllowRetry(true))
	assert.Equal(t, 10, int(b.tokens.Load()))
	b.Succeeded(true, true)
	assert.Equal(t, 20, int(b.tokens.Load()))
	assert.True(t, b.AllowRetry(false))
	b.Succeeded(true, false)
	assert.Equal(t, 20, int(b.tokens.Load()))

	// Never above capacity.
	for range 1000 {
		b.Succeeded(false, false)
	}
	assert.Equal(t, 500, int(b.tokens.Load()))
	assert.Equal(t, "tokens 500/500", b.String())
}

func TestTokenBucketConcurrent(t *testing.T) {
	t.Parallel()
	b := newBucket(1000, 1, 0, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 500 {
				if b.AllowRetry(false) {
					n++
				}
			}
			mu.Lock()
			granted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, 1000, granted, "exactly the capacity is granted, never more")
}

func TestRatioBudget(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	b := newRatio(0.1, 10*time.Second, -1)
	now := start
	for range 1000 {
		b.BeginAt(now)
	}
	allowed := 0
	for b.AllowRetryAt(now, false) {
		allowed++
	}
	assert.Equal(t, 100, allowed, "10 % of the window's requests")

	// Once the window has slid past them, those requests no longer count.
	now = start.Add(11 * time.Second)
	assert.False(t, b.AllowRetryAt(now, false))
	for range 50 {
		b.BeginAt(now)
	}
	assert.True(t, b.AllowRetryAt(now, false))

	// The floor allows retries with no traffic at all.
	floor := newRatio(0, 10*time.Second, 2)
	allowed = 0
	for floor.AllowRetryAt(start, false) {
		allowed++
	}
	assert.Equal(t, 20, allowed, "2 per second over a 10 s window")
}

// TestRatioBudgetAnyTime: a RatioBudget accepts any time.Time, before 1970
// and the zero time included.
func TestRatioBudgetAnyTime(t *testing.T) {
	t.Parallel()
	for _, now := range []time.Time{{}, time.Unix(-1, 0), time.Unix(-1_000_000_000, 5), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(1<<40, 0)} {
		b := newRatio(0, 0, -1)
		assert.NotPanics(t, func() {
			for range 100 {
				b.BeginAt(now)
			}
			allowed := 0
			for b.AllowRetryAt(now, false) {
				allowed++
			}
			assert.Equal(t, 10, allowed, "%v", now)
			b.RefundAt(now, false)
			assert.True(t, b.AllowRetryAt(now, false), "%v: the refund made room", now)
			avail, capacity := b.LevelAt(now)
			assert.Equal(t, 0.0, avail)
			assert.Equal(t, 10.0, capacity)
		}, "%v", now)
	}
}

// TestRatioRefundLaterThanTheRetry: a refund given back in a later slot of
// the window than the retry it refunds (the caller cancelled during a long
// wait) uncounts that retry, no more: the window never holds fewer than
// zero retries, so the budget never reports more than its allowance nor
// allows more retries than it.
func TestRatioRefundLaterThanTheRetry(t *testing.T) {
	t.Parallel()
	b := newRatio(0.5, time.Second, 2)
	t0 := time.Unix(1_800_000_000, 0)
	require.True(t, b.AllowRetryAt(t0, false))
	b.RefundAt(t0.Add(500*time.Millisecond), false) // five slots later
	later := t0.Add(1050 * time.Millisecond)        // the retry's slot has left the window
	avail, capacity := b.LevelAt(later)
	assert.Equal(t, 2.0, capacity, "the floor: 2 per second")
	assert.Equal(t, 2.0, avail, "nothing counted, nothing more than the allowance")
	allowed := 0
	for allowed < 10 && b.AllowRetryAt(later, false) {
		allowed++
	}
	assert.Equal(t, 2, allowed, "retries allowed in the window")
}
