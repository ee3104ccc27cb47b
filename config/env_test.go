package config_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/config"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("PAYMENTS_MAX_ATTEMPTS", "2")
	t.Setenv("PAYMENTS_ATTEMPT_TIMEOUT", " none ")
	t.Setenv("PAYMENTS_MAX_RETRY_AFTER", "10s")
	t.Setenv("PAYMENTS_MAX_REPLAY_BYTES", "-1")
	t.Setenv("PAYMENTS_MAX_RESUMES", "-1")
	t.Setenv("PAYMENTS_BUDGET", "ratio")
	t.Setenv("OTHER_MAX_ATTEMPTS", "9")
	want := config.Policy{MaxAttempts: 2, AttemptTimeout: "none", MaxRetryAfter: "10s", MaxReplayBytes: -1,
		MaxResumes: -1, Budget: config.Budget{Kind: "ratio"}}
	for _, prefix := range []string{"PAYMENTS", "PAYMENTS_"} {
		c, err := config.FromEnv(prefix)
		require.NoError(t, err)
		assert.Equal(t, want, c, "prefix %q", prefix)
	}

	c, err := config.FromEnv("PAYMENTS")
	require.NoError(t, err)
	p, err := c.Apply(httpretry.Policy{MaxAttempts: 5, MaxRetryAfter: time.Minute, AttemptHeader: "X-Attempt"})
	require.NoError(t, err)
	assert.Equal(t, 2, p.MaxAttempts)
	assert.Equal(t, 10*time.Second, p.MaxRetryAfter)
	assert.Negative(t, p.AttemptTimeout)
	assert.Negative(t, p.MaxReplayBytes)
	assert.Negative(t, p.MaxResumes)
	assert.Equal(t, "X-Attempt", p.AttemptHeader, "what no variable sets is kept")
	assert.Contains(t, fmt.Sprint(p.NewBudget("x")), "ratio", "a ratio budget, as its String says")
}

func TestFromEnvUnsetAndEmpty(t *testing.T) {
	t.Setenv("EMPTY_MAX_ATTEMPTS", "")
	t.Setenv("EMPTY_BUDGET", "  ")
	c, err := config.FromEnv("EMPTY")
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
	c, err := config.FromEnv("BAD")
	assert.Zero(t, c)
	assert.Equal(t, []string{
		`httpretry: invalid config: BAD_MAX_REPLAY_BYTES: "1MiB" is not an integer`,
		`httpretry: invalid config: BAD_ATTEMPT_TIMEOUT: "5" has no unit: write a duration such as "5s"`,
		`httpretry: invalid config: BAD_BUDGET: "adaptive" is not one of token-bucket, default, ratio, none`,
		`httpretry: invalid policy: BAD_MAX_ATTEMPTS: -2 is negative`,
		`httpretry: invalid policy: BAD_MAX_RETRY_AFTER: -1s is negative`,
	}, errorLines(t, err))
}

// An operator who sets a variable expects it to hold for every host
// (issue 23): File.Override puts it over the top level and over every
// Hosts entry that sets the field itself; entries that leave it out
// inherit it. What no variable sets is kept, and a per-host setting never
// lands on a key with a path.
func TestEnvironmentOverridesEveryHost(t *testing.T) {
	t.Setenv("OPS_MAX_ATTEMPTS", "1")
	t.Setenv("OPS_BUDGET", "none")
	env, err := config.FromEnv("OPS")
	require.NoError(t, err)
	file, err := config.Parse([]byte(`{"max_attempts": 3, "attempt_header": "X-Attempt",
		"hosts": {
			"pay.example.com": {"max_attempts": 5, "max_retry_after": "2m", "budget": {"capacity": 100}},
			"pay.example.com/v1/refunds": {"max_attempts": 2, "keys": {"header": "X-Refund-Key"}},
			"search.example.com": {"hedge": {"delay": "100ms"}}
		}}`))
	require.NoError(t, err)

	over := file.Override(env)
	assert.Equal(t, config.File{
		Policy: config.Policy{MaxAttempts: 1, AttemptHeader: "X-Attempt", Budget: config.Budget{Kind: "none"}},
		Hosts: map[string]config.Policy{
			"pay.example.com":            {MaxAttempts: 1, MaxRetryAfter: "2m", Budget: config.Budget{Kind: "none"}},
			"pay.example.com/v1/refunds": {MaxAttempts: 1, Keys: config.Keys{Header: "X-Refund-Key"}},
			"search.example.com":         {Hedge: config.Hedge{Delay: "100ms"}},
		},
	}, over)
	assert.Equal(t, 5, file.Hosts["pay.example.com"].MaxAttempts, "Override leaves the file it was given alone")

	tr, err := over.Transport()
	require.NoError(t, err)
	upstream := httpretrytest.NewScript(httpretrytest.Status(503))
	tr.Base = upstream
	for _, url := range []string{
		"https://pay.example.com/v1/charges", "https://pay.example.com/v1/refunds/1",
		"https://search.example.com/q", "https://other.example.com/",
	} {
		before := len(upstream.Requests())
		resp, err := tr.RoundTrip(getURL(t, url))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, len(upstream.Requests())-before, "%s: one attempt, as the environment says", url)
	}

	assert.Equal(t, file, file.Override(config.Policy{}), "no variable set: the file as it was")
}
