package config_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/config"
	"github.com/seedhq/httpretry/httpretrytest"
)

// A configuration read from JSON builds a Transport; what is code (here
// Base, and a classifier for one host) is set on it before its first
// request.
func ExampleParse() {
	data := []byte(`{
		"max_attempts": 3,
		"backoff": {"base": "1ms", "cap": "10ms"},
		"hosts": {
			"payments.example.com": {"max_attempts": 5, "max_retry_after": "2m"},
			"payments.example.com/v1/refunds": {"keys": {"header": "X-Refund-Key"}},
			"*.internal.example.com": {"max_attempts": 1}
		}
	}`)
	cfg, err := config.Parse(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := cfg.Transport()
	if err != nil {
		fmt.Println(err)
		return
	}
	upstream := httpretrytest.NewScript(httpretrytest.Status(503)) // always unavailable
	tr.Base = upstream
	client := &http.Client{Transport: tr}

	for _, url := range []string{
		"https://payments.example.com/v1/charges",
		"https://payments.example.com/v1/refunds/42",
		"https://billing.internal.example.com/status",
		"https://api.example.org/status",
	} {
		before := len(upstream.Requests())
		resp, err := client.Get(url)
		if err != nil {
			fmt.Println(err)
			continue
		}
		resp.Body.Close()
		fmt.Printf("%s: %d attempts\n", url, len(upstream.Requests())-before)
	}
	// Output:
	// https://payments.example.com/v1/charges: 5 attempts
	// https://payments.example.com/v1/refunds/42: 5 attempts
	// https://billing.internal.example.com/status: 1 attempts
	// https://api.example.org/status: 3 attempts
}

// Every problem is reported at once, each at its path in the config's own
// names: Parse reports what is not a File in JSON, Transport every other
// problem.
func ExampleParse_errors() {
	_, err := config.Parse([]byte(`{
		"max_attempts": "3",
		"hosts": {"api.example.com": {"max_retry_afer": "1m"}}
	}`))
	fmt.Println(err)

	cfg, err := config.Parse([]byte(`{
		"max_attempts": 3,
		"attempt_timeout": "2",
		"hosts": {
			"api.example.com": {"max_attempts": -1},
			"api.example.com/v1": {"breaker": {"consecutive_failures": 5}},
			"https://other.example.com": {}
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = cfg.Transport()
	fmt.Println(err)
	// Output:
	// httpretry: invalid config: max_attempts: want an integer, got "3"
	// httpretry: invalid config: hosts["api.example.com"].max_retry_afer: unknown field
	// httpretry: invalid config: attempt_timeout: "2" has no unit: write a duration such as "2s"
	// httpretry: invalid policy: hosts["api.example.com"].max_attempts: -1 is negative
	// httpretry: invalid policy: hosts["api.example.com/v1"].breaker: is per host: set it on the key without the path
	// httpretry: invalid policy: hosts["https://other.example.com"]: a key is "host", "host:port" or "*.suffix", optionally followed by a path prefix such as "/v1/search", not a URL
}

// Environment variables go over a Policy written in code, or over a
// configuration file's settings; the code's functions are kept.
func ExampleFromEnv() {
	os.Setenv("PAYMENTS_HTTP_MAX_ATTEMPTS", "2")
	os.Setenv("PAYMENTS_HTTP_ATTEMPT_TIMEOUT", "1500ms")
	os.Setenv("PAYMENTS_HTTP_BUDGET", "none")
	defer os.Unsetenv("PAYMENTS_HTTP_MAX_ATTEMPTS")
	defer os.Unsetenv("PAYMENTS_HTTP_ATTEMPT_TIMEOUT")
	defer os.Unsetenv("PAYMENTS_HTTP_BUDGET")

	env, err := config.FromEnv("PAYMENTS_HTTP")
	if err != nil {
		fmt.Println(err)
		return
	}
	policy, err := env.Apply(httpretry.Policy{
		MaxAttempts:   5,
		AttemptHeader: "X-Attempt",
		Classify: func(req *http.Request, resp *http.Response, err error) httpretry.Class {
			return httpretry.ClassDefault
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(policy.MaxAttempts, policy.AttemptTimeout, policy.AttemptHeader, policy.Classify != nil)

	// Over a file's settings: the environment wins where it says something.
	file := config.Policy{MaxAttempts: 4, MaxRetryAfter: "30s"}
	merged, _ := json.Marshal(env.Over(file))
	fmt.Println(string(merged))

	os.Setenv("PAYMENTS_HTTP_MAX_ATTEMPTS", "-1")
	_, err = config.FromEnv("PAYMENTS_HTTP")
	fmt.Println(err)
	// Output:
	// 2 1.5s X-Attempt true
	// {"max_attempts":2,"attempt_timeout":"1500ms","max_retry_after":"30s","budget":{"kind":"none"}}
	// httpretry: invalid policy: PAYMENTS_HTTP_MAX_ATTEMPTS: -1 is negative
}

// The data of a Policy written in code, as JSON: to log the configuration
// in effect, or to start a configuration file from.
func ExampleOf() {
	cfg, err := config.Of(&httpretry.Transport{
		Policy: httpretry.Policy{MaxAttempts: 3, AttemptHeader: "X-Attempt", NewBudget: httpretry.NoBudget},
		Hosts: map[string]httpretry.Policy{
			"api.example.com": {Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5}, AttemptTimeout: -1},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.MarshalIndent(cfg, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "max_attempts": 3,
	//   "attempt_header": "X-Attempt",
	//   "budget": {
	//     "kind": "none"
	//   },
	//   "hosts": {
	//     "api.example.com": {
	//       "attempt_timeout": "none",
	//       "breaker": {
	//         "consecutive_failures": 5
	//       }
	//     }
	//   }
	// }
}

// An environment variable applies to every host, also to one whose entry
// sets the field: an operator who turns retries off during an incident
// turns them off everywhere.
func ExampleFile_Override() {
	os.Setenv("PAYMENTS_HTTP_MAX_ATTEMPTS", "1")
	defer os.Unsetenv("PAYMENTS_HTTP_MAX_ATTEMPTS")

	cfg, err := config.Parse([]byte(`{
		"max_attempts": 3,
		"hosts": {
			"payments.example.com": {"max_attempts": 5, "max_retry_after": "2m"},
			"search.example.com": {"hedge": {"delay": "100ms"}}
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	env, err := config.FromEnv("PAYMENTS_HTTP")
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.Marshal(cfg.Override(env))
	fmt.Println(string(out))
	// Output:
	// {"max_attempts":1,"hosts":{"payments.example.com":{"max_attempts":1,"max_retry_after":"2m"},"search.example.com":{"hedge":{"delay":"100ms"}}}}
}
