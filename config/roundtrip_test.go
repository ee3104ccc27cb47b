package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/config"
	"github.com/seedhq/httpretry/httpretrytest"
)

// call is one request of a scenario.
type call struct {
	method, url string
	body        string // sent without GetBody, so it is replayable only if buffered
}

// configScenario is a policy written in code, the same policy written as JSON
// (empty: the JSON is made from the code with ConfigOf), the upstream's
// script, and the calls made.
type configScenario struct {
	name   string
	policy httpretry.Policy
	hosts  map[string]httpretry.Policy
	json   string
	script func() *httpretrytest.Script
	calls  []call
	// want holds lines the transcript must contain, so that a scenario
	// cannot pass by doing nothing on both sides.
	want []string
}

// transcript runs the calls through t over a fresh script, inside a
// synctest bubble, and describes everything that happened, one line per
// attempt, per request the upstream saw, and per call.
func transcript(t *testing.T, tr *httpretry.Transport, sc configScenario) []string {
	var lines []string
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		add := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, fmt.Sprintf(format, args...))
		}
		script := sc.script()
		tr.Base = script
		tr.OnAttempt = func(a httpretry.Attempt) {
			delay := a.DelaySource.String()
			if a.DelaySource == httpretry.DelayBackoff {
				delay += "=" + a.Delay.String() // other sources are jittered
			}
			outcome := strconv.Itoa(0)
			if a.Response != nil {
				outcome = strconv.Itoa(a.Response.StatusCode)
			}
			add("attempt %s #%d %s class=%v retry=%v delay=%s stop=%v hedge=%v lost=%v",
				a.Host, a.N, outcome, a.Class, a.Retry, delay, a.Stop, a.Hedge, a.Lost)
		}
		for _, c := range sc.calls {
			var body io.Reader
			if c.body != "" {
				body = io.NopCloser(strings.NewReader(c.body)) // no GetBody
			}
			req, err := http.NewRequestWithContext(context.Background(), c.method, c.url, body)
			require.NoError(t, err)
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			took := time.Since(start)
			if err != nil {
				add("call %s %s: error %v after %v", c.method, c.url, err, took)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			add("call %s %s: %d %q", c.method, c.url, resp.StatusCode, b)
		}
		for _, r := range script.Requests() {
			var keys []string
			for _, h := range []string{"Idempotency-Key", "X-Key"} {
				if k := r.Header.Get(h); k != "" {
					keys = append(keys, fmt.Sprintf("%s(quoted=%v)", h, strings.HasPrefix(k, `"`)))
				}
			}
			add("upstream %s %s attempt=%d keys=%v x-attempt=%q", r.Method, r.URL, r.Attempt, keys, r.Header.Get("X-Attempt"))
		}
	})
	return lines
}

func always(o httpretrytest.Outcome) func() *httpretrytest.Script {
	return func() *httpretrytest.Script { return httpretrytest.NewScript(o) }
}

func configScenarios() []configScenario {
	noJitter := backoff.Exponential{Base: 100 * time.Millisecond, Factor: 3, Cap: time.Second, Jitter: backoff.NoJitter}
	return []configScenario{{
		name:   "attempts, backoff and the attempt header",
		policy: httpretry.Policy{MaxAttempts: 3, Backoff: noJitter, AttemptHeader: "X-Attempt"},
		script: func() *httpretrytest.Script {
			return httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Respond(200, "ok"))
		},
		calls: []call{{"GET", "https://api.example.com/x", ""}},
		want: []string{
			"attempt api.example.com:443 #1 503 class=transient retry=true delay=backoff=100ms stop=none hedge=false lost=false",
			"attempt api.example.com:443 #2 503 class=transient retry=true delay=backoff=300ms stop=none hedge=false lost=false",
			`upstream GET https://api.example.com/x attempt=3 keys=[] x-attempt="3"`,
		},
	}, {
		name:   "a Retry-After above max_retry_after ends retrying",
		policy: httpretry.Policy{MaxRetryAfter: 2 * time.Second},
		script: always(httpretrytest.RetryAfter(503, "5")),
		calls:  []call{{"GET", "https://api.example.com/x", ""}},
		want:   []string{"attempt api.example.com:443 #1 503 class=transient retry=false delay=none stop=server-requested wait above MaxRetryAfter hedge=false lost=false"},
	}, {
		name:   "host and path entries inherit what they leave out",
		policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(10 * time.Millisecond)},
		hosts: map[string]httpretry.Policy{
			"api.example.com":        {MaxAttempts: 4},
			"api.example.com/v1/pay": {Keys: httpretry.KeyPolicy{Header: "X-Key", Quoted: true}},
		},
		script: always(httpretrytest.Status(503)),
		calls: []call{
			{"GET", "https://other.example.com/x", ""},
			{"GET", "https://api.example.com/x", ""},
			{"POST", "https://api.example.com/v1/pay", "{}"},
		},
		want: []string{
			"attempt other.example.com:443 #2 503 class=transient retry=false delay=none stop=attempts exhausted hedge=false lost=false",
			"attempt api.example.com:443 #4 503 class=transient retry=false delay=none stop=attempts exhausted hedge=false lost=false",
			"upstream POST https://api.example.com/v1/pay attempt=4 keys=[X-Key(quoted=true)] x-attempt=\"\"",
		},
	}, {
		name:   "attempt_timeout none overrides an inherited timeout",
		policy: httpretry.Policy{MaxAttempts: 2, AttemptTimeout: 100 * time.Millisecond, Backoff: backoff.Constant(0)},
		hosts:  map[string]httpretry.Policy{"slow.example.com": {AttemptTimeout: -1}},
		script: always(httpretrytest.Respond(200, "late").After(300 * time.Millisecond)),
		calls:  []call{{"GET", "https://fast.example.com/x", ""}, {"GET", "https://slow.example.com/x", ""}},
		want:   []string{`call GET https://slow.example.com/x: 200 "late"`},
	}, {
		name:   "a breaker opens",
		policy: httpretry.Policy{MaxAttempts: 1, Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 2, OpenFor: time.Minute}},
		hosts:  map[string]httpretry.Policy{"other.example.com": {Breaker: httpretry.BreakerPolicy{Disabled: true}}},
		script: always(httpretrytest.Status(503)),
		calls: []call{
			{"GET", "https://api.example.com/x", ""}, {"GET", "https://api.example.com/x", ""}, {"GET", "https://api.example.com/x", ""},
			{"GET", "https://other.example.com/x", ""}, {"GET", "https://other.example.com/x", ""}, {"GET", "https://other.example.com/x", ""},
		},
		want: []string{"call GET https://api.example.com/x: error httpretry: circuit breaker is open for api.example.com:443 after 0s"},
	}, {
		name:   "a hedge wins",
		policy: httpretry.Policy{MaxAttempts: 3, Hedge: httpretry.HedgePolicy{Delay: 50 * time.Millisecond, MaxHedges: 1}},
		hosts:  map[string]httpretry.Policy{"nohedge.example.com": {Hedge: httpretry.HedgePolicy{Disabled: true}}},
		script: func() *httpretrytest.Script {
			return httpretrytest.NewScript(httpretrytest.Respond(200, "slow").After(time.Second), httpretrytest.Respond(200, "fast"),
				httpretrytest.Respond(200, "only").After(time.Second))
		},
		calls: []call{{"GET", "https://api.example.com/x", ""}, {"GET", "https://nohedge.example.com/x", ""}},
		want:  []string{`call GET https://api.example.com/x: 200 "fast"`, `call GET https://nohedge.example.com/x: 200 "only"`},
	}, {
		name:   "keys: methods and disabled",
		policy: httpretry.Policy{MaxAttempts: 1, Keys: httpretry.KeyPolicy{Methods: []string{"PATCH"}}},
		hosts:  map[string]httpretry.Policy{"nokeys.example.com": {Keys: httpretry.KeyPolicy{Disabled: true}}},
		script: always(httpretrytest.Respond(200, "ok")),
		calls: []call{
			{"POST", "https://api.example.com/x", "a"}, {"PATCH", "https://api.example.com/x", "b"},
			{"PATCH", "https://nokeys.example.com/x", "c"},
		},
		want: []string{
			"upstream POST https://api.example.com/x attempt=1 keys=[] x-attempt=\"\"",
			"upstream PATCH https://api.example.com/x attempt=1 keys=[Idempotency-Key(quoted=false)] x-attempt=\"\"",
			"upstream PATCH https://nokeys.example.com/x attempt=1 keys=[] x-attempt=\"\"",
		},
	}, {
		name: "hints: should-retry and reset headers",
		policy: httpretry.Policy{MaxAttempts: 2, Hints: httpretry.HintPolicy{
			ShouldRetryHeader: "X-Should-Retry", ResetHeader: "X-RateLimit-Reset"}},
		hosts: map[string]httpretry.Policy{"epoch.example.com": {MaxAttempts: 2, Hints: httpretry.HintPolicy{
			ResetHeader: "X-RateLimit-Reset", IgnoreRateLimit: true}}},
		script: func() *httpretrytest.Script {
			s := httpretrytest.NewScript(httpretrytest.Status(503).Header("X-Should-Retry", "false"))
			s.OnPath("/reset", httpretrytest.Status(429).Header("X-RateLimit-Reset", "2"), httpretrytest.Status(200))
			s.On(func(r *http.Request) bool { return r.URL.Host == "epoch.example.com" },
				httpretrytest.Func(func(*http.Request) (*http.Response, error) {
					h := http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(time.Now().Unix()+3, 10)}}
					return &http.Response{StatusCode: 429, Header: h, Body: http.NoBody}, nil
				}), httpretrytest.Status(200))
			return s
		},
		calls: []call{
			{"GET", "https://api.example.com/x", ""}, {"GET", "https://api.example.com/reset", ""},
			{"GET", "https://epoch.example.com/x", ""},
		},
		want: []string{
			"attempt api.example.com:443 #1 503 class=fatal retry=false delay=none stop=not retryable hedge=false lost=false",
			"attempt api.example.com:443 #1 429 class=transient retry=true delay=ratelimit stop=none hedge=false lost=false",
			"attempt epoch.example.com:443 #1 429 class=transient retry=true delay=ratelimit stop=none hedge=false lost=false",
		},
	}, {
		name:   "max_replay_bytes negative: never buffer",
		policy: httpretry.Policy{MaxReplayBytes: -1},
		hosts:  map[string]httpretry.Policy{"buffered.example.com": {MaxReplayBytes: 1 << 10, Backoff: backoff.Constant(0)}},
		script: always(httpretrytest.Status(503)),
		calls:  []call{{"PUT", "https://api.example.com/x", "body"}, {"PUT", "https://buffered.example.com/x", "body"}},
		want: []string{
			"attempt api.example.com:443 #1 503 class=transient retry=false delay=none stop=request not replayable hedge=false lost=false",
			"attempt buffered.example.com:443 #4 503 class=transient retry=false delay=none stop=attempts exhausted hedge=false lost=false",
		},
	}, {
		name: "a token bucket with numbers, and no budget",
		json: `{"max_attempts": 4, "backoff": {"shape": "constant", "base": "0s"},
			"budget": {"kind": "token-bucket", "capacity": 10, "retry_cost": 5},
			"hosts": {"free.example.com": {"budget": {"kind": "none"}}}}`,
		policy: httpretry.Policy{MaxAttempts: 4, Backoff: backoff.Constant(0),
			NewBudget: func(string) httpretry.Budget {
				return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
			}},
		hosts:  map[string]httpretry.Policy{"free.example.com": {NewBudget: httpretry.NoBudget}},
		script: always(httpretrytest.Status(503)),
		calls: []call{
			{"GET", "https://api.example.com/x", ""}, {"GET", "https://api.example.com/x", ""},
			{"GET", "https://free.example.com/x", ""}, {"GET", "https://free.example.com/x", ""},
		},
		want: []string{
			"attempt api.example.com:443 #3 503 class=transient retry=false delay=none stop=retry budget exhausted hedge=false lost=false",
			"attempt api.example.com:443 #1 503 class=transient retry=false delay=none stop=retry budget exhausted hedge=false lost=false",
			"attempt free.example.com:443 #4 503 class=transient retry=false delay=none stop=attempts exhausted hedge=false lost=false",
		},
	}, {
		name: "a ratio budget",
		json: `{"max_attempts": 3, "backoff": {"shape": "constant", "base": "0s"},
			"budget": {"kind": "ratio", "ratio": 0.5, "window": "10s", "min_per_second": -1}}`,
		policy: httpretry.Policy{MaxAttempts: 3, Backoff: backoff.Constant(0),
			NewBudget: func(string) httpretry.Budget {
				return httpretry.NewRatioBudget(httpretry.RatioConfig{Ratio: 0.5, Window: 10 * time.Second, MinPerSecond: -1})
			}},
		script: always(httpretrytest.Status(503)),
		calls:  []call{{"GET", "https://api.example.com/x", ""}, {"GET", "https://api.example.com/x", ""}, {"GET", "https://api.example.com/x", ""}},
		want:   []string{"attempt api.example.com:443 #1 503 class=transient retry=false delay=none stop=retry budget exhausted hedge=false lost=false"},
	}}
}

// TestConfigBehavesAsPolicy runs each scenario twice, through a Transport
// with the policy written in code and through one built from its config
// after a trip through JSON, and compares what happened.
func TestConfigBehavesAsPolicy(t *testing.T) {
	for _, sc := range configScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			data := []byte(sc.json)
			if sc.json == "" {
				c, err := config.Of(&httpretry.Transport{Policy: sc.policy, Hosts: sc.hosts})
				require.NoError(t, err)
				data, err = json.Marshal(c)
				require.NoError(t, err)
			}
			c, err := config.Parse(data)
			require.NoError(t, err, "%s", data)
			fromConfig, err := c.Transport()
			require.NoError(t, err)

			require.NoError(t, (&httpretry.Transport{Policy: sc.policy, Hosts: sc.hosts}).Validate())
			fromCode := &httpretry.Transport{Policy: sc.policy, Hosts: sc.hosts}
			want := transcript(t, fromCode, sc)
			got := transcript(t, fromConfig, sc)
			assert.Equal(t, want, got, "config %s", data)
			for _, line := range sc.want {
				assert.Contains(t, want, line)
			}
		})
	}
}
