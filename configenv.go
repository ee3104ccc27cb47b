package httpretry

import (
	"os"
	"strconv"
	"strings"
)

// envVars are the variables FromEnv reads, named after the prefix, and the
// config field each sets.
var envVars = []struct {
	name, field string
	set         func(c *PolicyConfig, v string) bool
}{
	{"MAX_ATTEMPTS", "max_attempts", func(c *PolicyConfig, v string) bool {
		n, err := strconv.Atoi(v)
		c.MaxAttempts = n
		return err == nil
	}},
	{"ATTEMPT_TIMEOUT", "attempt_timeout", func(c *PolicyConfig, v string) bool {
		c.AttemptTimeout = Duration(v)
		return true
	}},
	{"MAX_RETRY_AFTER", "max_retry_after", func(c *PolicyConfig, v string) bool {
		c.MaxRetryAfter = Duration(v)
		return true
	}},
	{"MAX_REPLAY_BYTES", "max_replay_bytes", func(c *PolicyConfig, v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		c.MaxReplayBytes = n
		return err == nil
	}},
	{"BUDGET", "budget", func(c *PolicyConfig, v string) bool {
		c.Budget = BudgetConfig{Kind: v}
		return true
	}},
}

// FromEnv reads the policy settings of the environment variables named
// with prefix and an underscore (for the prefix "HTTPRETRY",
// HTTPRETRY_MAX_ATTEMPTS and so on; an empty prefix reads the bare names),
// in the formats of the config fields they set:
//
//	<PREFIX>_MAX_ATTEMPTS      max_attempts: an integer; 1 disables retries
//	<PREFIX>_ATTEMPT_TIMEOUT   attempt_timeout: a duration such as "2s", or "none"
//	<PREFIX>_MAX_RETRY_AFTER   max_retry_after: a duration
//	<PREFIX>_MAX_REPLAY_BYTES  max_replay_bytes: an integer; negative: never buffer
//	<PREFIX>_BUDGET            budget.kind: "token-bucket", "ratio" or "none"
//
// A variable that is unset or empty leaves its field zero. Apply the result
// over a Policy with Apply, or over a config with Over: it replaces only
// what the variables set, and leaves Transport.Hosts entries that set a
// field of their own alone. It reports every problem at once, each naming
// its variable and wrapping ErrInvalidConfig or ErrInvalidPolicy.
func FromEnv(prefix string) (PolicyConfig, error) {
	var c PolicyConfig
	var e errList
	names := make(map[string]string, len(envVars))
	for _, v := range envVars {
		name := v.name
		if prefix != "" {
			name = strings.TrimSuffix(prefix, "_") + "_" + name
		}
		names[v.field] = name
		s := strings.TrimSpace(os.Getenv(name))
		if s != "" && !v.set(&c, s) {
			e.config(name, "%q is not an integer", s)
		}
	}
	var check errList
	p := check.toPolicy(c, "")
	check.validated(&Transport{Base: noBase{}, Policy: p})
	for _, err := range check.errs {
		if fe, ok := err.(*fieldError); ok {
			field, _, _ := strings.Cut(fe.path, ".")
			if name, ok := names[field]; ok {
				fe.path = name
			}
		}
		e.errs = append(e.errs, err)
	}
	if err := e.err(); err != nil {
		return PolicyConfig{}, err
	}
	return c, nil
}
