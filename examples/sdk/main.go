// Sdk runs google/go-github over httpretry against a local fake of the
// GitHub REST API that fails the way the real one does under load, and
// prints every attempt. It needs no network beyond 127.0.0.1.
//
//	cd examples/sdk && go run .
//
// Any SDK that accepts an *http.Client works the same way: build the client
// with an httpretry.Transport and hand it over. go-github has no retries of
// its own (its opt-in SleepUntilPrimaryRateLimitResetWhenRateLimited context
// value is left unset here), so every retry below is httpretry's, and the
// SDK sees one response per call: the one that ended retrying.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/seedhq/httpretry"
)

// newGitHubClient returns a go-github client for the API at baseURL whose
// requests go through rt.
func newGitHubClient(baseURL string, rt http.RoundTripper) (*github.Client, error) {
	httpClient := &http.Client{
		Timeout:   2 * time.Minute, // bounds a whole call, retries and Retry-After waits included
		Transport: rt,
	}
	// WithAuthToken wraps the transport to set the Authorization header; a
	// constant token may sit above the retries. A layer that signs each
	// request (with a timestamp or nonce) must go under them, as Base.
	return github.NewClient(httpClient).
		WithAuthToken("ghp_example_not_a_real_token").
		WithEnterpriseURLs(baseURL, baseURL)
}

// githubPolicy is the retry policy for the GitHub API.
func githubPolicy() httpretry.Policy {
	return httpretry.Policy{
		// GitHub's rate limits answer 403 (or 429); a 403 is fatal by
		// default, so say which ones are worth waiting for.
		Classify: classifyGitHub,
		// When the primary rate limit is exhausted GitHub sends the reset
		// instant in X-RateLimit-Reset, as Unix seconds. A reset within
		// MaxRetryAfter (60 s by default) is waited for; a later one ends
		// retrying at once and the SDK returns its *github.RateLimitError.
		// Retry-After, when present, comes first.
		Hints: httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset"}, // a Unix time, as GitHub sends
		// An Idempotency-Key makes a retried POST safe only on a server
		// that deduplicates by it. Unless your API documents that, turn
		// keys off: a POST is then repeated only when it provably never
		// reached the server.
		Keys: httpretry.KeyPolicy{Disabled: true},
	}
}

// classifyGitHub makes GitHub's rate-limit 403s retryable: the secondary
// rate limit, which carries Retry-After, and the primary one, which says
// X-RateLimit-Remaining: 0 and carries X-RateLimit-Reset. How long to wait
// comes from those headers, within MaxRetryAfter. Every other 403 (no
// permission) stays fatal, and everything else gets the built-in
// classification.
func classifyGitHub(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		return httpretry.ClassDefault
	}
	h := resp.Header
	if h.Get("Retry-After") != "" || (h.Get("X-RateLimit-Remaining") == "0" && h.Get("X-RateLimit-Reset") != "") {
		return httpretry.ClassTransient
	}
	return httpretry.ClassDefault
}

func main() {
	fake := newFakeGitHub("1")
	srv := fake.start()
	defer srv.Close()

	policy := githubPolicy()
	// This client waits at most 2 s for a rate limit (60 s by default), so
	// that step 6 runs in seconds.
	policy.MaxRetryAfter = 2 * time.Second
	gh, err := newGitHubClient(srv.URL, &httpretry.Transport{
		Policy:    policy,
		OnAttempt: printAttempt,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	fmt.Println("1. Repositories.Get: the gateway answers 502 twice, then the API answers")
	repo, _, err := gh.Repositories.Get(ctx, "seedhq", "httpretry")
	report(err, func() string { return fmt.Sprintf("%s, %d stars", repo.GetFullName(), repo.GetStargazersCount()) })

	fmt.Println("\n2. Issues.ListByRepo: 429 with Retry-After: 1, then the list")
	issues, _, err := gh.Issues.ListByRepo(ctx, "seedhq", "httpretry", nil)
	report(err, func() string { return fmt.Sprintf("%d open issue(s), first: %q", len(issues), issues[0].GetTitle()) })

	fmt.Println("\n3. Search.Issues: GitHub's secondary rate limit, a 403 with Retry-After: 1;")
	fmt.Println("   classifyGitHub makes it retryable, so the SDK never sees it")
	found, _, err := gh.Search.Issues(ctx, "retry budget repo:seedhq/httpretry", nil)
	report(err, func() string { return fmt.Sprintf("%d result(s)", found.GetTotal()) })

	fmt.Println("\n4. Issues.Create: the issue is created, then the answer is lost (502).")
	fmt.Println("   Without an idempotency key a POST that may have been applied is not")
	fmt.Println("   replayable, so httpretry stops (\"request not replayable\"): the SDK")
	fmt.Println("   gets the 502 and the caller decides")
	_, _, err = gh.Issues.Create(ctx, "seedhq", "httpretry", &github.IssueRequest{Title: github.Ptr("flaky upstream")})
	var apiErr *github.ErrorResponse
	if errors.As(err, &apiErr) {
		fmt.Printf("   => SDK error: %d; issues the fake created: %d (not duplicated)\n",
			apiErr.Response.StatusCode, len(fake.created()))
	} else {
		report(err, func() string { return "created" })
	}

	fmt.Println("\n5. Repositories.Get as a health check, with retries off for this one call")
	fmt.Println("   (httpretry.WithoutRetries in its context): the 502 comes back at once")
	fake.fail(routeRepo, badGateway)
	_, _, err = gh.Repositories.Get(httpretry.WithoutRetries(ctx), "seedhq", "httpretry")
	report(err, func() string { return "healthy" })

	fmt.Println("\n6. Issues.ListByRepo rate-limited for 3 s, above this client's 2 s ceiling:")
	fmt.Println("   a call that cannot wait gets the 429 at once; a nightly export raises")
	fmt.Println("   its own ceiling with httpretry.WithPolicy and waits")
	fake.fail(routeListIssues, rateLimited("3"), rateLimited("3"))
	_, _, err = gh.Issues.ListByRepo(ctx, "seedhq", "httpretry", nil)
	report(err, func() string { return "listed" })
	export := withRateLimitCeiling(ctx, 10*time.Second)
	issues, _, err = gh.Issues.ListByRepo(export, "seedhq", "httpretry", nil)
	report(err, func() string { return fmt.Sprintf("%d open issue(s), after waiting", len(issues)) })
}

// withRateLimitCeiling returns ctx with the longest server-requested wait
// obeyed raised to d, for the calls made with it only: a batch job that can
// wait out a rate limit, next to interactive calls that cannot.
func withRateLimitCeiling(ctx context.Context, d time.Duration) context.Context {
	return httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.MaxRetryAfter = d })
}

func report(err error, ok func() string) {
	if err != nil {
		fmt.Printf("   => SDK error: %v\n", err)
		return
	}
	fmt.Printf("   => %s\n", ok())
}

func printAttempt(a httpretry.Attempt) {
	outcome := ""
	if a.Err != nil {
		outcome = a.Err.Error()
	} else {
		outcome = a.Response.Status
	}
	next := "done: " + a.Stop.String()
	if a.Retry {
		next = fmt.Sprintf("retry in %v (%s)", a.Delay.Round(time.Millisecond), a.DelaySource)
	}
	path := strings.TrimPrefix(a.Request.URL.Path, "/api/v3")
	fmt.Printf("   attempt %d %s %s -> %s [%s] %s\n", a.N, a.Request.Method, path, outcome, a.Class, next)
}
