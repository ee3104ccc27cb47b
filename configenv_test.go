package httpretry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("PAYMENTS_MAX_ATTEMPTS", "2")
	t.Setenv("PAYMENTS_ATTEMPT_TIMEOUT", " none ")
	t.Setenv("PAYMENTS_MAX_RETRY_AFTER", "10s")
	t.Setenv("PAYMENTS_MAX_REPLAY_BYTES", "-1")
	t.Setenv("PAYMENTS_BUDGET", "ratio")
	t.Setenv("OTHER_MAX_ATTEMPTS", "9")
	want := httpretry.PolicyConfig{MaxAttempts: 2, AttemptTimeout: "none", MaxRetryAfter: "10s", MaxReplayBytes: -1,
		Budget: httpretry.BudgetConfig{Kind: "ratio"}}
	for _, prefix := range []string{"PAYMENTS", "PAYMENTS_"} {
		c, err := httpretry.FromEnv(prefix)
		require.NoError(t, err)
		assert.Equal(t, want, c, "prefix %q", prefix)
	}

	c, err := httpretry.FromEnv("PAYMENTS")
	require.NoError(t, err)
	p, err := c.Apply(httpretry.Policy{MaxAttempts: 5, MaxRetryAfter: time.Minute, AttemptHeader: "X-Attempt"})
	require.NoError(t, err)
	assert.Equal(t, 2, p.MaxAttempts)
	assert.Equal(t, 10*time.Second, p.MaxRetryAfter)
	assert.Negative(t, p.AttemptTimeout)
	assert.Negative(t, p.MaxReplayBytes)
	assert.Equal(t, "X-Attempt", p.AttemptHeader, "what no variable sets is kept")
	_, isRatio := p.NewBudget("x").(*httpretry.RatioBudget)
	assert.True(t, isRatio)
}

func TestFromEnvUnsetAndEmpty(t *testing.T) {
	t.Setenv("EMPTY_MAX_ATTEMPTS", "")
	t.Setenv("EMPTY_BUDGET", "  ")
	c, err := httpretry.FromEnv("EMPTY")
	require.NoError(t, err)
	assert.Zero(t, c)
	p := httpretry.Policy{MaxAttempts: 3}
	got, err := c.Apply(p)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

// Every problem is reported at once, each naming its variable.
func TestFromEnvErrors(t *testing.T) {
	t.Setenv("BAD_MAX_ATTEMPTS", "-2")
	t.Setenv("BAD_ATTEMPT_TIMEOUT", "5")
	t.Setenv("BAD_MAX_RETRY_AFTER", "-1s")
	t.Setenv("BAD_MAX_REPLAY_BYTES", "1MiB")
	t.Setenv("BAD_BUDGET", "adaptive")
	c, err := httpretry.FromEnv("BAD")
	assert.Zero(t, c)
	assert.Equal(t, []string{
		`httpretry: invalid config: BAD_MAX_REPLAY_BYTES: "1MiB" is not an integer`,
		`httpretry: invalid config: BAD_ATTEMPT_TIMEOUT: "5" has no unit: write a duration such as "5s"`,
		`httpretry: invalid config: BAD_BUDGET: "adaptive" is not one of token-bucket, default, ratio, none`,
		`httpretry: invalid policy: BAD_MAX_ATTEMPTS: -2 is negative`,
		`httpretry: invalid policy: BAD_MAX_RETRY_AFTER: -1s is negative`,
	}, errorLines(t, err))
}
