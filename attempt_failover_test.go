package httpretry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Failover (Policy.Endpoints): the request's host is eu.test; its
// endpoints us.test and ap.test stand for other regions.

// onHost matches the requests sent to host.
func onHost(host string) func(*http.Request) bool {
	return func(req *http.Request) bool { return req.URL.Host == host }
}

// hostsOf lists the URL host of each request, in order.
func hostsOf(reqs []httpretrytest.Request) []string {
	hosts := make([]string, len(reqs))
	for i, r := range reqs {
		hosts[i] = r.URL.Host
	}
	return hosts
}

// failoverPolicy is the policy of the tests: eu.test fails over to
// us.test, then ap.test, without waits between attempts.
func failoverPolicy() httpretry.Policy {
	return httpretry.Policy{
		Backoff:   backoff.Constant(0),
		NewBudget: httpretry.NoBudget,
		Endpoints: []string{"us.test", "ap.test"},
	}
}

func send(t *testing.T, tr *httpretry.Transport, method string, body string) (*http.Response, error) {
	t.Helper()
	var req *http.Request
	if body == "" {
		req, _ = http.NewRequestWithContext(t.Context(), method, "https://eu.test/v1/pay", nil)
	} else {
		req, _ = http.NewRequestWithContext(t.Context(), method, "https://eu.test/v1/pay", strings.NewReader(body))
	}
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	return resp, err
}

func TestFailoverRetryGoesToAnotherEndpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"), httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": failoverPolicy()}}
		o := watch(tr)
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, []string{"eu.test", "us.test"}, hostsOf(base.Requests()))
		require.Len(t, o.attempts, 2)
		assert.Equal(t, "eu.test:443", o.attempts[0].Host)
		assert.Equal(t, "us.test:443", o.attempts[1].Host, "Attempt.Host names the endpoint")
		assert.Len(t, o.lines("endpoint=eu.test:443"), 1, "the attempt's log record names its endpoint")
		assert.Equal(t, "eu.test:443", o.calls[0].Host, "the call is the request's host's")
	})
}

func TestFailoverRetryPrefersEndpointNotFailed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).
			On(onHost("eu.test"), httpretrytest.Status(503)).
			On(onHost("us.test"), httpretrytest.Fail(httpretrytest.ConnReset()))
		p := failoverPolicy()
		p.NewBudget = nil // the default budget: state for each host that fails
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, []string{"eu.test", "us.test", "ap.test"}, hostsOf(base.Requests()))
		assert.Equal(t, int64(1), statsOf(t, tr, "eu.test:443").Attempts, "each endpoint has its own entry")
		us := statsOf(t, tr, "us.test:443")
		assert.Equal(t, int64(1), us.Attempts)
	})
	synctest.Test(t, func(t *testing.T) {
		// Every endpoint failed once: the next retry starts over, in order.
		base := httpretrytest.NewScript(httpretrytest.Status(503))
		p := failoverPolicy()
		p.MaxAttempts = 5
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, []string{"eu.test", "us.test", "ap.test", "eu.test", "eu.test"}, hostsOf(base.Requests()))
	})
}

func TestFailoverBreakerOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		down := true
		var mu sync.Mutex
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"),
			httpretrytest.Func(func(*http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				if down {
					return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
			}))
		p := failoverPolicy()
		p.MaxAttempts = 1
		p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 2, OpenFor: 10 * time.Second}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		for range 2 {
			resp, err := send(t, tr, http.MethodGet, "")
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode, "one attempt: no retry to move")
		}
		// eu.test's breaker is open: first attempts go to us.test.
		for range 3 {
			resp, err := send(t, tr, http.MethodGet, "")
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
		}
		assert.Equal(t, []string{"eu.test", "eu.test", "us.test", "us.test", "us.test"}, hostsOf(base.Requests()))
		eu := statsOf(t, tr, "eu.test:443")
		require.NotNil(t, eu.Breaker)
		assert.Equal(t, httpretry.BreakerOpen, eu.Breaker.State)
		assert.Equal(t, int64(3), eu.Breaker.Refusals)
		for _, s := range tr.Stats() {
			assert.NotEqual(t, "us.test:443", s.Host, "an endpoint that has only succeeded holds no state")
		}

		// The primary recovers; once its breaker half-opens, traffic is back.
		mu.Lock()
		down = false
		mu.Unlock()
		time.Sleep(11 * time.Second)
		for range 2 {
			resp, err := send(t, tr, http.MethodGet, "")
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
		}
		assert.Equal(t, []string{"eu.test", "eu.test"}, hostsOf(base.Requests())[5:])
		assert.Equal(t, httpretry.BreakerClosed, statsOf(t, tr, "eu.test:443").Breaker.State)
	})
}

func TestFailoverAllBreakersOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(503))
		p := failoverPolicy()
		p.MaxAttempts = 1
		p.Endpoints = []string{"us.test"}
		p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		_, _ = send(t, tr, http.MethodGet, "") // opens eu.test's
		_, _ = send(t, tr, http.MethodGet, "") // goes to us.test, opens its
		_, err := send(t, tr, http.MethodGet, "")
		require.ErrorIs(t, err, httpretry.ErrCircuitOpen)
		assert.ErrorContains(t, err, "eu.test:443", "the refusal is the request's own host's")
		assert.Equal(t, []string{"eu.test", "us.test"}, hostsOf(base.Requests()))
	})
}

func TestFailoverSameKeyOnEveryEndpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(503)).On(onHost("ap.test"), httpretrytest.Status(201))
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": failoverPolicy()}}
		resp, err := send(t, tr, http.MethodPost, `{"amount":1}`)
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode)
		reqs := base.Requests()
		assert.Equal(t, []string{"eu.test", "us.test", "ap.test"}, hostsOf(reqs))
		httpretrytest.CheckSameKey(t, reqs)
		httpretrytest.CheckSameBody(t, reqs)
		assert.NotEmpty(t, reqs[0].Key)
	})
}

func TestFailoverUnkeyedPostNeverMoves(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"),
			httpretrytest.Fail(httpretrytest.DialRefused()), httpretrytest.Status(503))
		p := failoverPolicy()
		p.Keys.Disabled = true
		p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 2, OpenFor: time.Minute}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		// A refused dial proves it never reached the server: retried, on
		// the request's own host.
		resp, err := send(t, tr, http.MethodPost, "x")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, []string{"eu.test", "eu.test"}, hostsOf(base.Requests()))
		// eu.test's breaker is open: the unkeyed POST is refused rather
		// than moved, while a GET moves.
		_, err = send(t, tr, http.MethodPost, "x")
		assert.ErrorIs(t, err, httpretry.ErrCircuitOpen)
		resp, err = send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, []string{"eu.test", "eu.test", "us.test"}, hostsOf(base.Requests()))
	})
}

func TestFailoverNonReplayableBodyNeverMoves(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"), httpretrytest.Status(503))
		p := failoverPolicy()
		p.MaxReplayBytes = -1 // never buffer: a body without GetBody cannot be sent twice
		p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: time.Minute}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		put := func() (*http.Response, error) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "https://eu.test/v1/doc",
				httpretrytest.NewBody("doc"))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			return resp, err
		}
		resp, err := put()
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		_, err = put()
		assert.ErrorIs(t, err, httpretry.ErrCircuitOpen, "refused at its own host, not moved")
		assert.Equal(t, []string{"eu.test"}, hostsOf(base.Requests()))
	})
}

func TestFailoverHostHeaderAndURL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		type seen struct{ url, host, key string }
		var mu sync.Mutex
		var got []seen
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			got = append(got, seen{req.URL.String(), req.Host, req.Header.Get("Idempotency-Key")})
			mu.Unlock()
			code := 200
			if req.URL.Host == "eu.test" {
				code = 503
			}
			return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		})
		p := failoverPolicy()
		p.Endpoints = []string{"US.test:8443"}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://eu.test/v1/items?page=2", nil)
		req.Host = "eu.test"
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, got, 2)
		assert.Equal(t, seen{"https://eu.test/v1/items?page=2", "eu.test", "k1"}, got[0])
		assert.Equal(t, seen{"https://us.test:8443/v1/items?page=2", "us.test:8443", "k1"}, got[1])
		assert.Equal(t, "https://eu.test/v1/items?page=2", req.URL.String(), "the caller's request is untouched")
		assert.Equal(t, "eu.test", req.Host)
	})
}

func TestFailoverRetryChargedToTarget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A retry moved to us.test adds load to us.test: its budget pays
		// (a successful retry's cost comes back, as in the AWS SDKs'
		// quota, so both regions fail here).
		base := httpretrytest.NewScript(httpretrytest.Status(503))
		var mu sync.Mutex
		budgets := map[string]httpretry.Budget{}
		p := failoverPolicy()
		p.MaxAttempts = 2
		p.Endpoints = []string{"us.test"}
		p.NewBudget = func(host string) httpretry.Budget {
			b := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
			mu.Lock()
			budgets[host] = b
			mu.Unlock()
			return b
		}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		for range 2 {
			resp, err := send(t, tr, http.MethodGet, "")
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
		}
		assert.Equal(t, []string{"eu.test", "us.test", "eu.test", "us.test"}, hostsOf(base.Requests()))
		assert.Equal(t, 10, tokens(budgets["eu.test:443"]), "the failed endpoint's budget is not charged")
		assert.Equal(t, 0, tokens(budgets["us.test:443"]), "two retries of 5 tokens")
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "us.test's budget is empty: no retry")
		assert.Len(t, base.Requests(), 5)
		assert.Equal(t, int64(1), statsOf(t, tr, "us.test:443").Budget.Refusals)
	})
}

func TestFailoverEndpointPolicy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// us.test has an entry of its own: its breaker opens after one
		// failure; ap.test has none and takes the request's policy.
		base := httpretrytest.NewScript(httpretrytest.Status(503)).On(onHost("ap.test"), httpretrytest.Status(200))
		p := failoverPolicy()
		p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 5, OpenFor: time.Minute}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{
			"eu.test": p,
			"us.test": {Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: time.Minute}},
		}}
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, httpretry.BreakerOpen, statsOf(t, tr, "us.test:443").Breaker.State)
		assert.Equal(t, httpretry.BreakerClosed, statsOf(t, tr, "eu.test:443").Breaker.State)
	})
}

func TestFailoverHedgesGoElsewhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		slow := func(d time.Duration) httpretrytest.Outcome {
			return httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
				select {
				case <-time.After(d):
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
			})
		}
		base := httpretrytest.NewScript(slow(time.Millisecond)).On(onHost("eu.test"), slow(time.Second))
		p := failoverPolicy()
		p.Hedge = httpretry.HedgePolicy{Delay: 50 * time.Millisecond, MaxHedges: 2}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		o := watch(tr)
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, []string{"eu.test", "us.test"}, hostsOf(base.Requests()), "the hedge backs up eu.test elsewhere")
		for _, a := range o.attempts {
			if a.Hedge {
				assert.Equal(t, "us.test:443", a.Host)
			}
		}
	})
}

func TestFailoverPerRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"), httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": failoverPolicy()}}
		ctx := httpretry.WithPolicy(t.Context(), func(p *httpretry.Policy) { p.Endpoints = []string{} })
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://eu.test/", nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode, "an empty list overrides the inherited one")
		assert.Equal(t, []string{"eu.test", "eu.test", "eu.test", "eu.test"}, hostsOf(base.Requests()))
	})
}

func TestFailoverValidate(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{
		Hosts: map[string]httpretry.Policy{
			"eu.example.com": {Endpoints: []string{"us.example.com", "", "https://x.example.com", "a.example.com/v1",
				"b.example.com:99999", "US.example.com"}},
			"pay.example.com": {Endpoints: []string{"ok.example.com:8443", "bad host"}},
		},
	}
	err := tr.Validate()
	require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
	var pe *httpretry.PolicyError
	require.True(t, errors.As(err, &pe))
	for _, want := range []string{
		`Hosts["eu.example.com"].Endpoints[1]: empty`,
		`Hosts["eu.example.com"].Endpoints[2]:`,
		`Hosts["eu.example.com"].Endpoints[3]:`,
		`Hosts["eu.example.com"].Endpoints[4]:`,
		`Hosts["eu.example.com"].Endpoints[5]: "US.example.com" repeats entry 0`,
		`Hosts["pay.example.com"].Endpoints[1]:`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "Endpoints[0]:")
	assert.NotContains(t, err.Error(), `Endpoints[0] `)

	ok := &httpretry.Transport{Hosts: map[string]httpretry.Policy{"eu.example.com": {Endpoints: []string{"us.example.com", "[::1]:8443", "10.0.0.2"}}},
		Base: httpretrytest.NewScript(httpretrytest.Status(200))}
	assert.NoError(t, ok.Validate())

	// Per request, the same checks, under WithPolicy.
	ctx := httpretry.WithPolicy(context.Background(), func(p *httpretry.Policy) { p.Endpoints = append(p.Endpoints, "*.example.com") })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://eu.example.com/", nil)
	_, err = ok.RoundTrip(req)
	require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
	assert.ErrorContains(t, err, `WithPolicy.Endpoints[3]: "*.example.com": a wildcard is not an endpoint`)
}

// brokenBody yields its content, then fails as a cut connection does.
type brokenBody struct{ r io.Reader }

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *brokenBody) Close() error { return nil }

func TestFailoverResumeStaysOnTheEndpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, req.URL.Host+" "+req.Header.Get("Range"))
			mu.Unlock()
			h := http.Header{"Etag": {`"v1"`}}
			switch {
			case req.URL.Host == "eu.test":
				return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
			case req.Header.Get("Range") == "":
				return &http.Response{StatusCode: 200, ContentLength: 10, Header: h,
					Body: &brokenBody{strings.NewReader("hello")}}, nil
			}
			h.Set("Content-Range", "bytes 5-9/10")
			return &http.Response{StatusCode: 206, ContentLength: 5, Header: h,
				Body: io.NopCloser(strings.NewReader("world"))}, nil
		})
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": failoverPolicy()}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://eu.test/file", nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, "helloworld", readAll(t, resp.Body))
		assert.Equal(t, []string{"eu.test ", "us.test ", "us.test bytes=5-"}, seen, "the resume asks the endpoint that answered")
	})
}

func TestFailoverHalfOpenTrialOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// eu.test's breaker is half-open, its one trial out on a slow
		// call: another call moves to us.test rather than being refused.
		var mu sync.Mutex
		down := true
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"),
			httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
				mu.Lock()
				d := down
				mu.Unlock()
				if d {
					return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
				}
				time.Sleep(time.Second)
				return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
			}))
		p := failoverPolicy()
		p.MaxAttempts = 1
		p.Breaker = httpretry.BreakerPolicy{ConsecutiveFailures: 1, OpenFor: 5 * time.Second}
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": p}}
		_, _ = send(t, tr, http.MethodGet, "") // opens eu.test's breaker
		mu.Lock()
		down = false
		mu.Unlock()
		time.Sleep(6 * time.Second)
		var wg sync.WaitGroup
		wg.Go(func() {
			resp, err := send(t, tr, http.MethodGet, "") // the trial
			assert.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
		})
		synctest.Wait()
		resp, err := send(t, tr, http.MethodGet, "")
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		wg.Wait()
		assert.Equal(t, []string{"eu.test", "eu.test", "us.test"}, hostsOf(base.Requests()))
	})
}
