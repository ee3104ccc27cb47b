package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stops lists why each attempt in log ended its call (StopNone for those
// that did not).
func stops(log *httpretrytest.AttemptLog) []httpretry.StopReason {
	var out []httpretry.StopReason
	for _, a := range log.Attempts() {
		out = append(out, a.Stop)
	}
	return out
}

// setup starts the upstreams and returns a client with the service's
// transport, its backoff waits set to zero (server-requested waits stay as
// the servers ask), and what it decided about each attempt. reroute, if
// set, changes where host names lead.
func setup(t *testing.T, retryAfter string, reroute func(u *upstreams, routes map[string]string)) (*upstreams, *http.Client, *httpretrytest.AttemptLog) {
	t.Helper()
	u := startUpstreams(retryAfter)
	t.Cleanup(u.close)
	routes := u.routes()
	if reroute != nil {
		reroute(u, routes)
	}
	base := dialLocal(routes)
	t.Cleanup(base.CloseIdleConnections)
	rt := newTransport(base, nil)
	rt.Policy.Backoff = backoff.Constant(0)
	for host, p := range rt.Hosts {
		p.Backoff = backoff.Constant(0)
		rt.Hosts[host] = p
	}
	rec := &httpretrytest.AttemptLog{}
	rt.OnAttempt = rec.Record
	return u, &http.Client{Transport: rt}, rec
}

func do(t *testing.T, ctx context.Context, client *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, strings.TrimSpace(string(b))
}

const charge = `{"amount":1999,"currency":"eur"}`

func TestPaymentsRetryAChargeUnderOneKey(t *testing.T) {
	t.Parallel()
	u, client, rec := setup(t, "0", nil)

	resp, body := do(t, context.Background(), client, http.MethodPost, "http://payments.internal/charges", charge)

	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "charge ch_1", body)
	keys := u.charges.requestKeys()
	require.Len(t, keys, 2)
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, keys[0], keys[1], "the retry carries the first attempt's key")
	assert.Equal(t, 1, u.charges.applied())
	assert.Equal(t, []httpretry.StopReason{httpretry.StopNone, httpretry.StopSuccess}, stops(rec))
}

func TestPaymentsMakeThreeAttempts(t *testing.T) {
	t.Parallel()
	// payments.internal leads to a server that always answers 503.
	_, client, rec := setup(t, "0", func(u *upstreams, routes map[string]string) {
		routes["payments.internal:80"] = routes["inventory.internal:80"]
	})

	resp, _ := do(t, context.Background(), client, http.MethodPost, "http://payments.internal/charges", charge)

	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the last answer is returned")
	assert.Equal(t, []httpretry.StopReason{httpretry.StopNone, httpretry.StopNone, httpretry.StopAttempts}, stops(rec))
}

func TestPaymentsAcceptLongerRetryAfter(t *testing.T) {
	t.Parallel()
	// The caller's deadline (one second) is shorter than every wait asked
	// for here, so no test waits; the stop reason shows what the policy
	// would have done.
	tests := []struct {
		name       string
		host       string
		retryAfter string
		want       httpretry.StopReason
	}{
		{"payments: 90 s would be waited for", "payments.internal", "90", httpretry.StopDeadline},
		{"payments: above 2 min is returned", "payments.internal", "180", httpretry.StopRetryAfter},
		{"default policy: 90 s is above its 60 s ceiling", "api.example.com", "90", httpretry.StopRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, client, rec := setup(t, tt.retryAfter, func(u *upstreams, routes map[string]string) {
				routes["api.example.com:80"] = routes["payments.internal:80"]
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()

			resp, _ := do(t, ctx, client, http.MethodPost, "http://"+tt.host+"/charges", charge)

			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, []httpretry.StopReason{tt.want}, stops(rec))
		})
	}
}

func TestSearchHedgesAStalledAttempt(t *testing.T) {
	t.Parallel()
	u, client, rec := setup(t, "0", nil)
	start := time.Now()

	resp, body := do(t, context.Background(), client, http.MethodGet, "http://search.internal/search?q=widgets", "")

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `3 results for "widgets"`, body)
	assert.Less(t, time.Since(start), time.Second, "answered by the hedge, not after the attempt timeout")
	assert.ElementsMatch(t, []httpretry.StopReason{httpretry.StopNone, httpretry.StopSuccess}, stops(rec))
	lost := 0
	for _, a := range rec.Attempts() {
		if a.Lost {
			lost++
		}
	}
	assert.Equal(t, 1, lost, "the stalled attempt lost to the hedge")
	require.Eventually(t, func() bool {
		requests, abandoned := u.searches.counts()
		return requests == 2 && abandoned == 1
	}, 5*time.Second, 5*time.Millisecond, "the stalled attempt is cancelled, so the server sees its client go")
}

func TestOtherInternalHostsAreNotRetried(t *testing.T) {
	t.Parallel()
	_, client, rec := setup(t, "0", nil)

	resp, body := do(t, context.Background(), client, http.MethodGet, "http://inventory.internal/stock", "")

	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "deploying", body)
	assert.Equal(t, []httpretry.StopReason{httpretry.StopAttempts}, stops(rec))
}

func TestUnlistedHostsGetTheDefaultPolicy(t *testing.T) {
	t.Parallel()
	// A host outside *.internal, leading to the server that always fails.
	_, client, rec := setup(t, "0", func(u *upstreams, routes map[string]string) {
		routes["api.example.com:80"] = routes["inventory.internal:80"]
	})

	resp, _ := do(t, context.Background(), client, http.MethodGet, "http://api.example.com/stock", "")

	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Len(t, stops(rec), 4 /* the default MaxAttempts */)
}
