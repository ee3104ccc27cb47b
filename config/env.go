package config

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/seedhq/httpretry"
)

// envVars are the variables FromEnv reads, named after the prefix, and the
// config field each sets.
var envVars = []struct {
	name, field string
	set         func(c *Policy, v string) bool
}{
	{"MAX_ATTEMPTS", "max_attempts", func(c *Policy, v string) bool {
		n, err := strconv.Atoi(v)
		c.MaxAttempts = n
		return err == nil
	}},
	{"ATTEMPT_TIMEOUT", "attempt_timeout", func(c *Policy, v string) bool {
		c.AttemptTimeout = Duration(v)
		return true
	}},
	{"MAX_RETRY_AFTER", "max_retry_after", func(c *Policy, v string) bool {
		c.MaxRetryAfter = Duration(v)
		return true
	}},
	{"MAX_REPLAY_BYTES", "max_replay_bytes", func(c *Policy, v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		c.MaxReplayBytes = n
		return err == nil
	}},
	{"MAX_RESUMES", "max_resumes", func(c *Policy, v string) bool {
		n, err := strconv.Atoi(v)
		c.MaxResumes = n
		return err == nil
	}},
	{"BUDGET", "budget", func(c *Policy, v string) bool {
		c.Budget = Budget{Kind: v}
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
//	<PREFIX>_MAX_RESUMES       max_resumes: an integer; negative: never resume a body
//	<PREFIX>_BUDGET            budget.kind: "token-bucket", "default", "ratio" or "none"
//
// A variable that is unset or empty leaves its field zero. Put the result
// over a File with File.Override, which applies each variable to every
// host, Hosts entries that set the field included; or over one Policy
// written in code with Policy.Apply. It reports every problem at once, each
// naming its variable and wrapping ErrInvalid or httpretry.ErrInvalidPolicy.
func FromEnv(prefix string) (Policy, error) {
	var c Policy
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
			e.config([]string{name}, "%q is not an integer", s)
		}
	}
	var check errList
	check.validated(&httpretry.Transport{Base: noBase{}, Policy: check.toPolicy(c, nil)})
	for _, err := range check.errs {
		var ce *Error
		if errors.As(err, &ce) && len(ce.Path) > 0 {
			if name, ok := names[ce.Path[0]]; ok {
				ce.Path = []string{name}
			}
		}
		e.errs = append(e.errs, err)
	}
	if err := e.err(); err != nil {
		return Policy{}, err
	}
	return c, nil
}
