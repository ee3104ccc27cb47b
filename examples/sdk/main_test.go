package main

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setup starts a fake whose rate limits say Retry-After: 0, and a go-github
// client over httpretry with p and no backoff waits.
func setup(t *testing.T, p httpretry.Policy) (*fakeGitHub, *github.Client, *httpretrytest.AttemptLog) {
	t.Helper()
	fake := newFakeGitHub("0")
	srv := fake.start()
	t.Cleanup(srv.Close)
	p.Backoff = backoff.Constant(0)
	rec := &httpretrytest.AttemptLog{}
	gh, err := newGitHubClient(srv.URL, &httpretry.Transport{Policy: p, OnAttempt: rec.Record})
	require.NoError(t, err)
	return fake, gh, rec
}

func TestSDKCallsSucceedThroughTransientFailures(t *testing.T) {
	t.Parallel()
	fake, gh, rec := setup(t, githubPolicy())
	ctx := context.Background()

	repo, _, err := gh.Repositories.Get(ctx, "seedhq", "httpretry")
	require.NoError(t, err)
	assert.Equal(t, "seedhq/httpretry", repo.GetFullName())
	assert.Equal(t, 42, repo.GetStargazersCount())

	issues, _, err := gh.Issues.ListByRepo(ctx, "seedhq", "httpretry", nil)
	require.NoError(t, err)
	require.Len(t, issues, 1)

	found, _, err := gh.Search.Issues(ctx, "retry budget", nil)
	require.NoError(t, err, "the secondary rate limit must be retried, not returned")
	assert.Equal(t, 1, found.GetTotal())

	assert.Len(t, fake.requests(routeRepo), 3, "two 502s, then 200")
	assert.Len(t, fake.requests(routeListIssues), 2, "429, then 200")
	assert.Len(t, fake.requests(routeSearch), 2, "403 secondary rate limit, then 200")

	// Every attempt is the SDK's request, headers and all.
	for _, route := range []string{routeRepo, routeListIssues, routeSearch} {
		for i, s := range fake.requests(route) {
			assert.Equal(t, "Bearer ghp_example_not_a_real_token", s.Header.Get("Authorization"), "%s attempt %d", route, i+1)
			assert.Equal(t, "go-github/"+github.Version, s.Header.Get("User-Agent"), "%s attempt %d", route, i+1)
			assert.NotEmpty(t, s.Header.Get("X-GitHub-Api-Version"), "%s attempt %d", route, i+1)
		}
	}

	// The rate-limited attempts waited as the server asked.
	var sources []string
	for _, a := range rec.Attempts() {
		if a.Retry {
			sources = append(sources, a.DelaySource.String())
		}
	}
	assert.Equal(t, []string{"backoff", "backoff", "retry-after", "retry-after"}, sources)
}

func TestUnkeyedPOSTIsNotRepeatedAfterItMayHaveBeenApplied(t *testing.T) {
	t.Parallel()
	fake, gh, rec := setup(t, githubPolicy())

	_, resp, err := gh.Issues.Create(context.Background(), "seedhq", "httpretry",
		&github.IssueRequest{Title: github.Ptr("flaky upstream")})

	var apiErr *github.ErrorResponse
	require.ErrorAs(t, err, &apiErr, "the SDK gets the 502 that ended retrying")
	got := rec.Attempts()
	require.Len(t, got, 1)
	assert.Equal(t, httpretry.StopNotReplayable, got[0].Stop, "what the demo prints: request not replayable")
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	seen := fake.requests(routeCreateIssue)
	require.Len(t, seen, 1, "a POST that reached the server is not sent again")
	assert.Empty(t, seen[0].Header.Get("Idempotency-Key"))
	assert.Equal(t, []string{"flaky upstream"}, fake.created())
}

func TestKeyedPOSTIsRetriedWithOneKey(t *testing.T) {
	t.Parallel()
	p := githubPolicy()
	p.Keys = httpretry.KeyPolicy{} // for an API that deduplicates by Idempotency-Key
	fake, gh, _ := setup(t, p)

	issue, _, err := gh.Issues.Create(context.Background(), "seedhq", "httpretry",
		&github.IssueRequest{Title: github.Ptr("flaky upstream")})

	require.NoError(t, err)
	assert.Positive(t, issue.GetNumber())
	seen := fake.requests(routeCreateIssue)
	require.Len(t, seen, 2)
	key := seen[0].Header.Get("Idempotency-Key")
	assert.NotEmpty(t, key)
	assert.Equal(t, key, seen[1].Header.Get("Idempotency-Key"), "one key for every attempt")
}

func TestSecondaryRateLimitIsFatalWithoutClassify(t *testing.T) {
	t.Parallel()
	fake, gh, _ := setup(t, httpretry.Policy{})

	_, _, err := gh.Search.Issues(context.Background(), "retry budget", nil)

	var abuse *github.AbuseRateLimitError
	require.ErrorAs(t, err, &abuse, "a 403 is fatal by default, so go-github sees it")
	assert.Len(t, fake.requests(routeSearch), 1)
}

func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		reset    time.Duration // from now until X-RateLimit-Reset
		attempts int
	}{
		// A reset already past (or within MaxRetryAfter) is waited for.
		{"resets now: waited for", -time.Second, 2},
		// GitHub's primary limit resets hourly: above MaxRetryAfter, so the
		// 403 goes back to the SDK at once.
		{"resets in an hour: returned", time.Hour, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeGitHub("0")
			fake.faults[routeRepo] = []fault{{
				status: http.StatusForbidden,
				header: map[string]string{
					"X-RateLimit-Remaining": "0",
					"X-RateLimit-Reset":     strconv.FormatInt(time.Now().Add(tt.reset).Unix(), 10),
				},
				body: `{"message":"API rate limit exceeded"}`,
			}}
			srv := fake.start()
			t.Cleanup(srv.Close)
			p := githubPolicy()
			p.Backoff = backoff.Constant(0)
			var stops []httpretry.StopReason
			gh, err := newGitHubClient(srv.URL, &httpretry.Transport{Policy: p, OnAttempt: func(a httpretry.Attempt) {
				stops = append(stops, a.Stop)
			}})
			require.NoError(t, err)

			_, _, err = gh.Repositories.Get(context.Background(), "seedhq", "httpretry")

			assert.Len(t, fake.requests(routeRepo), tt.attempts)
			if tt.attempts == 1 {
				var rle *github.RateLimitError
				require.ErrorAs(t, err, &rle)
				assert.Equal(t, []httpretry.StopReason{httpretry.StopRetryAfter}, stops)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func TestClassifyGitHub(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		header map[string]string
		want   httpretry.Class
	}{
		{"secondary rate limit", http.StatusForbidden, map[string]string{"Retry-After": "60"}, httpretry.ClassTransient},
		{"forbidden", http.StatusForbidden, nil, httpretry.ClassDefault},
		{"primary rate limit", http.StatusForbidden, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1798761600"}, httpretry.ClassTransient},
		{"remaining 0 without a reset", http.StatusForbidden, map[string]string{"X-RateLimit-Remaining": "0"}, httpretry.ClassDefault},
		{"too many requests", http.StatusTooManyRequests, map[string]string{"Retry-After": "60"}, httpretry.ClassDefault},
		{"ok", http.StatusOK, nil, httpretry.ClassDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			assert.Equal(t, tt.want, classifyGitHub(nil, resp, nil))
		})
	}
	assert.Equal(t, httpretry.ClassDefault, classifyGitHub(nil, nil, context.Canceled))
}

// TestPerCallPolicyThroughTheSDK: the override travels in the context the
// SDK is given: one call with retries off, one whose Retry-After ceiling is
// raised above the client's, on the fake clock of synctest, the fake GitHub
// served in memory.
func TestPerCallPolicyThroughTheSDK(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeGitHub("0")
		fake.faults = map[string][]fault{} // only what this test scripts
		// No http.Client.Timeout here: its timer goroutine outlives the
		// test when go-github leaves an error response's body open.
		gh, err := github.NewClient(&http.Client{Transport: &httpretry.Transport{
			Base:   &httpretrytest.HandlerTransport{Handler: fake.handler()},
			Policy: githubPolicy(), // MaxRetryAfter 60 s, the default
		}}).WithEnterpriseURLs("http://github.test/", "http://github.test/")
		require.NoError(t, err)
		ctx := t.Context()

		fake.fail(routeRepo, badGateway)
		_, resp, err := gh.Repositories.Get(httpretry.WithoutRetries(ctx), "seedhq", "httpretry")
		require.Error(t, err)
		assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
		assert.Len(t, fake.requests(routeRepo), 1, "retries off for this call")
		_, _, err = gh.Repositories.Get(ctx, "seedhq", "httpretry")
		require.NoError(t, err, "the next call retries as usual")

		fake.fail(routeListIssues, rateLimited("90"), rateLimited("90"))
		start := time.Now()
		_, resp, err = gh.Issues.ListByRepo(ctx, "seedhq", "httpretry", nil)
		require.Error(t, err)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Zero(t, time.Since(start), "90 s is above the 60 s ceiling: returned at once")

		issues, _, err := gh.Issues.ListByRepo(withRateLimitCeiling(ctx, 2*time.Minute), "seedhq", "httpretry", nil)
		require.NoError(t, err)
		assert.Len(t, issues, 1)
		assert.GreaterOrEqual(t, time.Since(start), 90*time.Second, "this call waited as the server asked")
		assert.Len(t, fake.requests(routeListIssues), 3)
	})
}
