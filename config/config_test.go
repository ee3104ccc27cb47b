package config_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/config"
	"github.com/seedhq/httpretry/httpretrytest"
)

// errorLines splits a joined error into its lines, checking that each
// carries the package's prefix and the sentinel its text names.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "httpretry: invalid config: "):
			assert.ErrorIs(t, err, config.ErrInvalid)
		case strings.HasPrefix(l, "httpretry: invalid policy: "):
			assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
		default:
			t.Errorf("error line without a known prefix: %q", l)
		}
	}
	return lines
}

// load reads data as a program does: Parse, then Transport. Parse reports
// what is not a File in JSON, Transport every other problem.
func load(t *testing.T, data []byte) error {
	c, err := config.Parse(data)
	if err != nil {
		assert.Zero(t, c, "no File with an error")
		return err
	}
	_, err = c.Transport()
	return err
}

func TestParseAndTransportErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, json string
		want       []string
	}{{
		name: "malformed JSON, with its position",
		json: "{\n  \"max_attempts\": 3,\n  \"hosts\": }",
		want: []string{`httpretry: invalid config: malformed JSON at line 3, column 12: invalid character '}' looking for beginning of value`},
	}, {
		name: "truncated JSON",
		json: `{"max_attempts": 3`,
		want: []string{`httpretry: invalid config: malformed JSON at line 1, column 19: unexpected end of JSON input`},
	}, {
		name: "not an object",
		json: `[1, 2]`,
		want: []string{`httpretry: invalid config: want an object, got [1,2]`},
	}, {
		name: "unknown, misspelt and repeated fields, everywhere",
		json: `{"max_attemps": 3, "Max_Attempts": 2, "backoff": {"shape": "linear", "jitter": "full", "jiter": 1},
			"odd\nname": 1,
			"hosts": {"api.example.com": {"max_attempts": 2, "max_attempts": 3, "hosts": {}},
			          "x.example.com": {"breaker": {"consecutive": 2}}}}`,
		want: []string{
			`httpretry: invalid config: max_attemps: unknown field`,
			`httpretry: invalid config: Max_Attempts: unknown field`,
			`httpretry: invalid config: backoff.jiter: unknown field`,
			`httpretry: invalid config: ["odd\nname"]: unknown field`,
			`httpretry: invalid config: hosts["api.example.com"].max_attempts: appears twice`,
			`httpretry: invalid config: hosts["api.example.com"].hosts: unknown field`,
			`httpretry: invalid config: hosts["x.example.com"].breaker.consecutive: unknown field`,
		},
	}, {
		name: "values of the wrong type",
		json: `{"max_attempts": "3", "attempt_timeout": 5, "max_replay_bytes": 1.5, "keys": {"methods": "POST", "quoted": "yes"},
			"hosts": {"a.example.com": {"keys": {"methods": ["POST", 7]}}, "b.example.com": 3}}`,
		want: []string{
			`httpretry: invalid config: max_attempts: want an integer, got "3"`,
			`httpretry: invalid config: attempt_timeout: want a duration string such as "250ms", got 5`,
			`httpretry: invalid config: max_replay_bytes: want an integer, got 1.5`,
			`httpretry: invalid config: keys.methods: want a list of strings, got "POST"`,
			`httpretry: invalid config: keys.quoted: want true or false, got "yes"`,
			`httpretry: invalid config: hosts["a.example.com"].keys.methods[1]: want a string, got 7`,
			`httpretry: invalid config: hosts["b.example.com"]: want an object, got 3`,
		},
	}, {
		name: "durations and names that do not parse",
		json: `{"max_retry_after": "60", "attempt_timeout": "soon", "hedge": {"delay": "none"},
			"backoff": {"shape": "expo"},
			"hosts": {"a.example.com": {"budget": {"kind": "leaky"}, "backoff": {"jitter": "half"}}}}`,
		want: []string{
			`httpretry: invalid config: backoff.shape: "expo" is not one of exponential, linear, constant, decorrelated`,
			`httpretry: invalid config: attempt_timeout: "soon" is not a duration such as "250ms" or "2s"`,
			`httpretry: invalid config: max_retry_after: "60" has no unit: write a duration such as "60s"`,
			`httpretry: invalid config: hedge.delay: "none" is not allowed here`,
			`httpretry: invalid config: hosts["a.example.com"].backoff.jitter: "half" is not one of none, full, equal, percent`,
			`httpretry: invalid config: hosts["a.example.com"].budget.kind: "leaky" is not one of token-bucket, default, ratio, none`,
		},
	}, {
		name: "fields that do not apply",
		json: `{"backoff": {"shape": "linear", "factor": 3, "percent": 0.2},
			"budget": {"kind": "ratio", "capacity": 10, "ratio": 0.2},
			"hosts": {"a.example.com": {"backoff": {"shape": "decorrelated", "jitter": "full", "step": "1s"},
			                            "budget": {"kind": "none", "window": "1s"}}}}`,
		want: []string{
			`httpretry: invalid config: backoff.factor: applies to the exponential shape only`,
			`httpretry: invalid config: backoff.percent: applies to jitter "percent" only`,
			`httpretry: invalid config: budget.capacity: belongs to kind "token-bucket", not "ratio"`,
			`httpretry: invalid config: hosts["a.example.com"].backoff.step: applies to the linear shape only`,
			`httpretry: invalid config: hosts["a.example.com"].backoff.jitter: the decorrelated shape is random already and takes no jitter`,
			`httpretry: invalid config: hosts["a.example.com"].budget.window: belongs to kind "ratio", not "none"`,
		},
	}, {
		name: "every check of Validate, with the config's names",
		json: `{"max_attempts": -1, "max_retry_after": "-1s", "attempt_header": "Bad Header",
			"keys": {"header": "X Key", "methods": ["POST", "GE T"]},
			"hints": {"should_retry_header": "a b", "reset_header": "c d"},
			"hedge": {"delay": "-1s", "max_hedges": -2},
			"backoff": {"base": "2s", "cap": "1s", "factor": 0.5},
			"breaker": {"consecutive_failures": -1, "failure_ratio": 2, "min_requests": -1, "window": "-1s", "open_for": "-1s", "half_open_attempts": -1},
			"hosts": {
				"a.example.com": {"breaker": {"min_requests": 5}, "attempt_header": "Idempotency-Key"},
				"a.example.com/v1": {"budget": {"kind": "none"}, "breaker": {"disabled": true}},
				"https://b.example.com": {},
				"*": {}}}`,
		want: []string{
			`httpretry: invalid policy: max_attempts: -1 is negative`,
			`httpretry: invalid policy: backoff: cap 1s below base 2s; factor 0.5 is not a finite number ≥ 1`,
			`httpretry: invalid policy: max_retry_after: -1s is negative`,
			`httpretry: invalid policy: attempt_header: "Bad Header" is not a valid header name`,
			`httpretry: invalid policy: keys.header: "X Key" is not a valid header name`,
			`httpretry: invalid policy: keys.methods[1]: "GE T" is not a valid method`,
			`httpretry: invalid policy: hints.should_retry_header: "a b" is not a valid header name`,
			`httpretry: invalid policy: hints.reset_header: "c d" is not a valid header name`,
			`httpretry: invalid policy: hedge.delay: -1s is negative`,
			`httpretry: invalid policy: hedge.max_hedges: -2 is negative`,
			`httpretry: invalid policy: breaker.consecutive_failures: -1 is negative`,
			`httpretry: invalid policy: breaker.failure_ratio: 2 is not in [0, 1]`,
			`httpretry: invalid policy: breaker.min_requests: -1 is negative`,
			`httpretry: invalid policy: breaker.window: -1s is negative`,
			`httpretry: invalid policy: breaker.open_for: -1s is negative`,
			`httpretry: invalid policy: breaker.half_open_attempts: -1 is negative`,
			`httpretry: invalid policy: hosts["*"]: "*" matches every host: set the top-level policy instead`,
			`httpretry: invalid policy: hosts["a.example.com"].breaker: no trip rule: set consecutive_failures or failure_ratio (or disabled)`,
			`httpretry: invalid policy: hosts["a.example.com/v1"].budget: is per host: set it on the key without the path`,
			`httpretry: invalid policy: hosts["a.example.com/v1"].breaker: is per host: set it on the key without the path`,
			`httpretry: invalid policy: hosts["https://b.example.com"]: a key is "host", "host:port" or "*.suffix", optionally followed by a path prefix such as "/v1/search", not a URL`,
		},
	}, {
		name: "a budget's numbers",
		json: `{"budget": {"capacity": -1, "retry_cost": -2},
			"hosts": {"a.example.com": {"budget": {"kind": "ratio", "ratio": -0.5, "window": "-2s"}}}}`,
		want: []string{
			`httpretry: invalid policy: budget.capacity: -1 is negative`,
			`httpretry: invalid policy: budget.retry_cost: -2 is negative`,
			`httpretry: invalid policy: hosts["a.example.com"].budget.ratio: -0.5 is not a number ≥ 0`,
			`httpretry: invalid policy: hosts["a.example.com"].budget.window: -2s is negative`,
		},
	}, {
		name: "the attempt header against an inherited key header",
		json: `{"keys": {"header": "X-Key"}, "hosts": {"a.example.com": {"attempt_header": "x-key"}}}`,
		want: []string{`httpretry: invalid policy: hosts["a.example.com"].attempt_header: "x-key" would overwrite idempotency keys with attempt numbers`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, errorLines(t, load(t, []byte(tc.json))))
		})
	}
}

// The same problems are reported when the config is decoded some other way
// (YAML, or json.Unmarshal into a larger struct), by Transport.
func TestConfigTransportReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := config.File{
		Policy: config.Policy{MaxAttempts: -1, AttemptTimeout: "2"},
		Hosts:  map[string]config.Policy{"a.example.com": {Hedge: config.Hedge{MaxHedges: -1}}},
	}
	tr, err := c.Transport()
	assert.Nil(t, tr)
	assert.Equal(t, []string{
		`httpretry: invalid config: attempt_timeout: "2" has no unit: write a duration such as "2s"`,
		`httpretry: invalid policy: max_attempts: -1 is negative`,
		`httpretry: invalid policy: hosts["a.example.com"].hedge.max_hedges: -1 is negative`,
	}, errorLines(t, err))

	_, err = c.Policy.Policy()
	assert.Equal(t, []string{
		`httpretry: invalid config: attempt_timeout: "2" has no unit: write a duration such as "2s"`,
		`httpretry: invalid policy: max_attempts: -1 is negative`,
	}, errorLines(t, err))
}

// File's UnmarshalJSON is strict inside a larger document, as Parse is,
// and leaves the values' checks to Transport.
func TestConfigUnmarshalJSON(t *testing.T) {
	t.Parallel()
	var app struct {
		Name  string      `json:"name"`
		Retry config.File `json:"retry"`
	}
	err := json.Unmarshal([]byte(`{"name": "payments", "retry": {"max_attempts": 2, "hosts": {"a.example.com": {"max_attemps": 3}}}}`), &app)
	assert.Equal(t, []string{`httpretry: invalid config: hosts["a.example.com"].max_attemps: unknown field`}, errorLines(t, err))

	require.NoError(t, json.Unmarshal([]byte(`{"name": "payments", "retry": {"max_attempts": -2}}`), &app))
	assert.Equal(t, -2, app.Retry.MaxAttempts)
	_, err = app.Retry.Transport()
	assert.Equal(t, []string{`httpretry: invalid policy: max_attempts: -2 is negative`}, errorLines(t, err))

	var p config.Policy
	err = json.Unmarshal([]byte(`{"max_attempts": 2, "hosts": {}}`), &p)
	assert.Equal(t, []string{`httpretry: invalid config: hosts: unknown field`}, errorLines(t, err), "a Policy has no hosts")
}

// fullConfig sets every field of a File somewhere.
const fullConfig = `{
  "max_attempts": 5,
  "backoff": {"shape": "exponential", "base": "200ms", "factor": 1.5, "cap": "none", "jitter": "percent", "percent": 0.25},
  "attempt_timeout": "2s",
  "max_retry_after": "30s",
  "max_replay_bytes": 65536,
  "keys": {"methods": ["POST", "PATCH"], "header": "X-Key", "quoted": true},
  "attempt_header": "X-Attempt",
  "budget": {"kind": "token-bucket", "capacity": 100, "retry_cost": 2, "timeout_cost": 4, "success_credit": 1},
  "breaker": {"consecutive_failures": 5, "failure_ratio": 0.5, "min_requests": 10, "window": "30s", "open_for": "10s", "half_open_attempts": 2},
  "hedge": {"delay": "150ms", "max_hedges": 2},
  "hints": {"should_retry_header": "X-Should-Retry", "ignore_rate_limit": true, "reset_header": "X-RateLimit-Reset"},
  "hosts": {
    "api.example.com": {"attempt_timeout": "none", "endpoints": ["api.us.example.com", "api.ap.example.com:8443"], "keys": {"disabled": true}, "budget": {"kind": "ratio", "ratio": 0.2, "window": "1m", "min_per_second": -1}},
    "api.example.com/v1/search": {"max_attempts": 2, "hedge": {"disabled": true}, "backoff": {"shape": "linear", "base": "1s", "step": "500ms", "cap": "5s", "jitter": "equal"}},
    "*.internal.example.com:8443": {"breaker": {"disabled": true}, "budget": {"kind": "none"}, "backoff": {"shape": "decorrelated", "base": "50ms", "cap": "2s"}},
    "pay.example.com": {"keys": {"methods": []}, "backoff": {"shape": "constant", "base": "250ms"}, "endpoints": []}
  }
}`

// config → JSON → config is the identity, and the JSON is stable.
func TestConfigJSONIdentity(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(fullConfig))
	require.NoError(t, err)
	data, err := json.Marshal(c)
	require.NoError(t, err)
	back, err := config.Parse(data)
	require.NoError(t, err)
	assert.Equal(t, c, back)
	again, err := json.Marshal(back)
	require.NoError(t, err)
	assert.JSONEq(t, string(data), string(again))
	assert.JSONEq(t, fullConfig, string(data), "nothing set is lost or added")
	assert.NotNil(t, back.Hosts["pay.example.com"].Keys.Methods, "an empty list of methods is kept")
}

// endpoints: a list per host key, an empty list kept (it overrides the
// inherited one), and Validate's errors in the config's names: endpoints
// at the top level, or on a wildcard key, would reach every host they
// cover, and are refused.
func TestConfigEndpoints(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{"hosts": {"pay.example.com": {"endpoints": []},
		"eu.example.com": {"endpoints": ["eu2.example.com"]}, "eu.example.com/v2": {"endpoints": ["eu3.example.com"]}}}`))
	require.NoError(t, err)
	tr, err := c.Transport()
	require.NoError(t, err)
	assert.Equal(t, []string{"eu3.example.com"}, tr.Hosts["eu.example.com/v2"].Endpoints)
	assert.Equal(t, []string{}, tr.Hosts["pay.example.com"].Endpoints, "[] is none, not inherit")
	assert.Equal(t, []string{"eu2.example.com"}, tr.Hosts["eu.example.com"].Endpoints)
	assert.Nil(t, tr.Hosts["eu.example.com"].Keys.Methods)

	c, err = config.Parse([]byte(`{"hosts": {"pay.example.com": {"endpoints": ["https://us.example.com", "a.example.com", "A.example.com"]}}}`))
	require.NoError(t, err)
	_, err = c.Transport()
	require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
	assert.Equal(t, []string{
		`httpretry: invalid policy: hosts["pay.example.com"].endpoints[0]: "https://us.example.com" is not a host name, or host:port: no scheme, path, query or userinfo`,
		`httpretry: invalid policy: hosts["pay.example.com"].endpoints[2]: "A.example.com" repeats entry 1`,
	}, errorLines(t, err))

	c, err = config.Parse([]byte(`{"endpoints": ["api.us.example.com"], "hosts": {"*.example.com": {"endpoints": ["mirror.internal"]}}}`))
	require.NoError(t, err)
	_, err = c.Transport()
	require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
	lines := errorLines(t, err)
	assert.Equal(t, []string{
		`httpretry: invalid policy: endpoints: this policy applies to every host without an entry of its own, third parties included, whose requests would move with their credentials: endpoints belong to the exact host key they fail over for, such as "api.example.com"`,
		`httpretry: invalid policy: hosts["*.example.com"].endpoints: a wildcard key covers every host under it, third parties included, whose requests would move with their credentials: endpoints belong to the exact host key they fail over for, such as "api.example.com"`,
	}, lines)

	_, err = config.Parse([]byte(`{"endpoints": "api.us.example.com"}`))
	assert.Equal(t, []string{`httpretry: invalid config: endpoints: want a list of strings, got "api.us.example.com"`}, errorLines(t, err))
}

// A host's entry holds only what it sets: the rest is zero in the Policy,
// so it inherits exactly as a Transport.Hosts entry written in code does.
func TestConfigHostsInherit(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{"max_attempts": 3, "attempt_timeout": "1s", "keys": {"header": "X-Key"},
		"hosts": {"api.example.com": {"max_attempts": 5}, "api.example.com/v1": {"attempt_timeout": "none"}}}`))
	require.NoError(t, err)
	tr, err := c.Transport()
	require.NoError(t, err)
	assert.Equal(t, httpretry.Policy{MaxAttempts: 3, AttemptTimeout: time.Second, Keys: httpretry.KeyPolicy{Header: "X-Key"}}, tr.Policy)
	assert.Equal(t, map[string]httpretry.Policy{
		"api.example.com":    {MaxAttempts: 5},
		"api.example.com/v1": {AttemptTimeout: -1},
	}, tr.Hosts)
}

// What the Policy turns off with a negative value or Disabled is written
// "none" or disabled.
func TestConfigExplicitOff(t *testing.T) {
	t.Parallel()
	p, err := config.Policy{
		AttemptTimeout: "none",
		MaxReplayBytes: -1,
		Keys:           config.Keys{Disabled: true},
		Budget:         config.Budget{Kind: "none"},
		Breaker:        config.Breaker{Disabled: true},
		Hedge:          config.Hedge{Disabled: true},
		Hints:          config.Hints{IgnoreRateLimit: true},
		Backoff:        config.Backoff{Cap: "none", Jitter: "none"},
	}.Policy()
	require.NoError(t, err)
	assert.Negative(t, p.AttemptTimeout)
	assert.Negative(t, p.MaxReplayBytes)
	assert.True(t, p.Keys.Disabled)
	assert.True(t, p.Breaker.Disabled)
	assert.True(t, p.Hedge.Disabled)
	assert.True(t, p.Hints.IgnoreRateLimit)
	assert.Equal(t, backoff.Exponential{Base: 100 * time.Millisecond, Factor: 2, Jitter: backoff.NoJitter}, p.Backoff)
	require.NotNil(t, p.NewBudget)
	assert.Equal(t, "unlimited", p.NewBudget("x").(interface{ String() string }).String(), "NoBudget")
}

// A backoff section describes a whole strategy; what it leaves out is
// backoff.Default()'s, whatever the policy would inherit.
func TestConfigBackoff(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		in   config.Backoff
		want backoff.Strategy
	}{
		{config.Backoff{Shape: "exponential"}, backoff.Default()},
		{config.Backoff{Base: "1s"}, backoff.Exponential{Base: time.Second, Factor: 2, Cap: 3 * time.Second, Jitter: backoff.FullJitter}},
		{config.Backoff{Base: "0s", Cap: "0s"}, backoff.Exponential{Factor: 2, Jitter: backoff.FullJitter}},
		{config.Backoff{Shape: "linear"}, backoff.Linear{Base: 100 * ms, Step: 100 * ms, Cap: 3 * time.Second, Jitter: backoff.FullJitter}},
		{config.Backoff{Shape: "constant", Base: "5s"}, backoff.Linear{Base: 5 * time.Second}},
		{config.Backoff{Shape: "constant", Jitter: "equal"}, backoff.Linear{Base: 100 * ms, Jitter: backoff.EqualJitter}},
		{config.Backoff{Shape: "decorrelated", Cap: "none"}, backoff.Decorrelated{Base: 100 * ms}},
	}
	for _, tc := range cases {
		p, err := config.Policy{Backoff: tc.in}.Policy()
		require.NoError(t, err, "%+v", tc.in)
		assert.Equal(t, tc.want, p.Backoff, "%+v", tc.in)
	}

	// Going the other way, every field is written out, and the strategy
	// comes back with the same delays.
	for _, s := range []backoff.Strategy{
		backoff.Default(),
		backoff.Exponential{Base: 10 * ms, Jitter: backoff.PercentJitter, Percent: 0.3},
		backoff.Linear{Base: ms, Step: 2 * ms, Jitter: backoff.NoJitter},
		backoff.Linear{Base: 7 * ms, Cap: 9 * ms, Jitter: backoff.FullJitter},
		backoff.Constant(42 * ms),
		backoff.Decorrelated{Base: ms, Cap: time.Second},
	} {
		c, err := config.PolicyOf(httpretry.Policy{Backoff: s})
		require.NoError(t, err)
		p, err := c.Policy()
		require.NoError(t, err, "%+v", c.Backoff)
		for n := 1; n <= 12; n++ {
			want := s.Delay(n, 50*ms, fixedRand(n))
			assert.Equal(t, want, p.Backoff.Delay(n, 50*ms, fixedRand(n)), "%#v → %+v, retry %d", s, c.Backoff, n)
		}
	}

	_, err := config.PolicyOf(httpretry.Policy{Backoff: customStrategy{}})
	assert.Equal(t, []string{`httpretry: invalid config: backoff: a config_test.customStrategy has no config form`}, errorLines(t, err))
}

type customStrategy struct{}

func (customStrategy) Delay(int, time.Duration, *rand.Rand) time.Duration { return 0 }

func fixedRand(seed int) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 7)) }

func TestConfigOf(t *testing.T) {
	t.Parallel()
	_, err := config.Of(&httpretry.Transport{Hosts: map[string]httpretry.Policy{
		"a.example.com": {NewBudget: func(string) httpretry.Budget { return nil }},
	}})
	assert.Equal(t, []string{`httpretry: invalid config: hosts["a.example.com"].budget: a function other than DefaultBudget and NoBudget has no config form`},
		errorLines(t, err))

	c, err := config.Of(&httpretry.Transport{Policy: httpretry.Policy{
		NewBudget: httpretry.DefaultBudget, AttemptTimeout: -time.Second, MaxRetryAfter: 90 * time.Second,
		Classify: func(*http.Request, *http.Response, error) httpretry.Class { return httpretry.ClassFatal },
	}})
	require.NoError(t, err, "functions are left out")
	assert.Equal(t, config.File{Policy: config.Policy{
		Budget: config.Budget{Kind: "token-bucket"}, AttemptTimeout: "none", MaxRetryAfter: "1m30s",
	}}, c)
	p, err := c.Policy.Policy()
	require.NoError(t, err)
	assert.Equal(t, reflectPointer(httpretry.DefaultBudget), reflectPointer(p.NewBudget), "the default budget comes back as itself")
}

// Over and Apply put one configuration over another, as a host's entry
// goes over Transport.Policy.
func TestConfigOverAndApply(t *testing.T) {
	t.Parallel()
	file := config.Policy{MaxAttempts: 5, AttemptTimeout: "1s", Hedge: config.Hedge{Delay: "100ms"}}
	env := config.Policy{MaxAttempts: 2, Hedge: config.Hedge{MaxHedges: 3}}
	assert.Equal(t, config.Policy{MaxAttempts: 2, AttemptTimeout: "1s", Hedge: config.Hedge{MaxHedges: 3}},
		env.Over(file), "sections are replaced whole")

	classify := func(*http.Request, *http.Response, error) httpretry.Class { return httpretry.ClassDefault }
	p, err := env.Apply(httpretry.Policy{MaxAttempts: 7, MaxRetryAfter: time.Second, Classify: classify})
	require.NoError(t, err)
	assert.Equal(t, 2, p.MaxAttempts)
	assert.Equal(t, time.Second, p.MaxRetryAfter)
	assert.Equal(t, httpretry.HedgePolicy{MaxHedges: 3}, p.Hedge)
	assert.NotNil(t, p.Classify, "the Policy's functions are kept")

	orig := httpretry.Policy{MaxAttempts: 7}
	got, err := config.Policy{MaxAttempts: -1}.Apply(orig)
	assert.Equal(t, orig, got)
	assert.Equal(t, []string{`httpretry: invalid policy: max_attempts: -1 is negative`}, errorLines(t, err))
}

// A file that sets anything under keys replaces the keys section, but
// the Policy's own key generator, Keys.New, is code and stays: the program
// goes on sending its own keys, in the header the file names.
func TestConfigApplyKeepsKeysNew(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{"keys":{"header":"X-Key","methods":["POST"]}}`))
	require.NoError(t, err)
	p, err := c.Policy.Apply(httpretry.Policy{
		Backoff: backoff.Constant(0),
		Keys:    httpretry.KeyPolicy{Header: "Idempotency-Key", Quoted: true, New: func() string { return "order-42" }},
	})
	require.NoError(t, err)
	assert.Equal(t, "X-Key", p.Keys.Header, "the file's section replaces the Policy's")
	assert.False(t, p.Keys.Quoted, "the section is replaced whole")
	require.NotNil(t, p.Keys.New, "the Policy's key generator is kept")

	fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
	fake.KeyHeader = "X-Key"
	tr := &httpretry.Transport{Base: fake, Policy: p}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://api.example.com/orders", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	reqs := fake.Requests()
	httpretrytest.CheckAttempts(t, reqs, 2)
	for _, r := range reqs {
		assert.Equal(t, "order-42", r.Key, "attempt %d", r.Attempt)
	}
}

// The Transport that Transport returns has not been used, so the caller can
// set what is code.
func TestConfigTransportIsUnused(t *testing.T) {
	t.Parallel()
	tr, err := config.File{Policy: config.Policy{MaxAttempts: 2},
		Hosts: map[string]config.Policy{"a.example.com": {MaxAttempts: 3}}}.Transport()
	require.NoError(t, err)
	fake := httpretrytest.NewScript(httpretrytest.Status(503))
	tr.Base = fake
	h := tr.Hosts["a.example.com"]
	h.Classify = func(*http.Request, *http.Response, error) httpretry.Class { return httpretry.ClassFatal }
	tr.Hosts["a.example.com"] = h
	require.NoError(t, tr.Validate())

	resp, err := tr.RoundTrip(getURL(t, "https://a.example.com/"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Len(t, fake.Requests(), 1, "the host's Classify, set after Transport, applies")
	resp, err = tr.RoundTrip(getURL(t, "https://b.example.com/"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Len(t, fake.Requests(), 3, "the top-level max_attempts applies elsewhere")
}

func getURL(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

func reflectPointer(f func(string) httpretry.Budget) uintptr { return reflect.ValueOf(f).Pointer() }

// A JSON null is the same as an omitted field.
func TestParseNull(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{"max_attempts": null, "keys": null, "backoff": {"base": null}, "hosts": null}`))
	require.NoError(t, err)
	assert.Zero(t, c)
	c, err = config.Parse([]byte(`null`))
	require.NoError(t, err)
	assert.Zero(t, c)
}

// A bad value of a megabyte makes an error of a few dozen bytes that
// quotes its start, not an error of a megabyte (issue 23).
func TestBadValueQuotedShort(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("9", 1<<20)
	for _, doc := range []string{
		`{"attempt_timeout": "` + huge + `"}`,
		`{"attempt_timeout": "x` + huge + `"}`,
		`{"backoff": {"shape": "` + huge + `"}}`,
	} {
		cfg, err := config.Parse([]byte(doc))
		if err == nil {
			_, err = cfg.Transport()
		}
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 300, "the error quotes the start of the value")
		assert.Contains(t, err.Error(), "999…")
	}
}

// BenchmarkFileTransport: what File.Transport costs for a file of 1,000
// hosts, each with a section of its own. It converts the file once and
// compiles the host table once to check it; the Transport it returns
// compiles its own at its first request (BenchmarkFirstRequest), since the
// caller may still set function fields first. docs/config.md quotes both.
func BenchmarkFileTransport(b *testing.B) {
	f := thousandHosts(b)
	for b.Loop() {
		if _, err := f.Transport(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstRequest: the compile a Transport from File.Transport does
// at its first request (Validate does the same work).
func BenchmarkFirstRequest(b *testing.B) {
	f := thousandHosts(b)
	for b.Loop() {
		b.StopTimer()
		tr, err := f.Transport()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := tr.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchHosts is how many hosts the benchmarks' file has.
const benchHosts = 1000

func thousandHosts(b *testing.B) config.File {
	var sb strings.Builder
	sb.WriteString(`{"max_attempts": 3, "hosts": {`)
	for i := range benchHosts {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"h%d.example.com": {"attempt_timeout": "2s", "breaker": {"consecutive_failures": 5}}`, i)
	}
	sb.WriteString(`}}`)
	f, err := config.Parse([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return f
}
