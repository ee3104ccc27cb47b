package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-github/v75/github"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A layout is one way of sending go-github's requests. go-github has no
// retries of its own, so there are two: without httpretry and with it.
type layout struct {
	name      string
	httpretry bool
}

var (
	sdkAlone    = layout{"go-github alone (its default http.Client)", false}
	recommended = layout{"go-github over httpretry, as main builds it", true}
)

// client returns a go-github client for the fake at url. go-github alone is
// github.NewClient(nil), whose http.Client is the zero one. Over httpretry
// it is newGitHubClient over githubPolicy, as main builds it, with no waits
// between retries (which changes nothing in the counts).
func (l layout) client(t *testing.T, url string) *github.Client {
	t.Helper()
	if !l.httpretry {
		gh, err := github.NewClient(nil).WithEnterpriseURLs(url, url)
		require.NoError(t, err)
		return gh
	}
	p := githubPolicy()
	p.Backoff = backoff.Constant(0)
	gh, err := newGitHubClient(url, &httpretry.Transport{Policy: p})
	require.NoError(t, err)
	return gh
}

// figures is what one layout did over a run of calls.
type figures struct {
	calls, ok, requests int
	first               int // requests of the first call
	created, duplicates int // Issues.Create: issues the fake created, and those that repeat an earlier title
}

func (f figures) String() string {
	s := fmt.Sprintf("%d/%d calls succeeded (%.1f %%), %.2f requests per call (%d for the first)",
		f.ok, f.calls, 100*float64(f.ok)/float64(f.calls), float64(f.requests)/float64(f.calls), f.first)
	if f.created > 0 {
		s += fmt.Sprintf(", %d issues created, %d duplicates", f.created, f.duplicates)
	}
	return s
}

// run makes n calls of op through l against a fresh fake GitHub, with none
// of the demo's scripted failures, behind faults set by fail, one call after
// the other, so that a seed gives the same faults.
func run(t *testing.T, l layout, n int, fail func(*faults), op func(gh *github.Client, i int) error) figures {
	t.Helper()
	fake := newFakeGitHub("0")
	fake.faults = map[string][]fault{}
	fl := newFaults(fake.handler(), 7)
	srv := httptest.NewServer(fl)
	t.Cleanup(srv.Close)
	gh := l.client(t, srv.URL+"/")
	fail(fl)
	f := figures{calls: n}
	for i := range n {
		if op(gh, i) == nil {
			f.ok++
		}
		if i == 0 {
			f.first = fl.requests()
		}
	}
	f.requests = fl.requests()
	titles := fake.created()
	f.created = len(titles)
	seen := map[string]bool{}
	for _, title := range titles {
		if seen[title] {
			f.duplicates++
		}
		seen[title] = true
	}
	return f
}

func getRepo(gh *github.Client, _ int) error {
	_, _, err := gh.Repositories.Get(context.Background(), "seedhq", "httpretry")
	return err
}

func createIssue(gh *github.Client, i int) error {
	_, _, err := gh.Issues.Create(context.Background(), "seedhq", "httpretry",
		&github.IssueRequest{Title: github.Ptr(fmt.Sprintf("issue %03d", i))})
	return err
}

// TestFigures measures the figures of docs/sdks.md:
//
//	cd examples/sdk && go test -run TestFigures -v
func TestFigures(t *testing.T) {
	t.Parallel()
	layouts := []layout{sdkAlone, recommended}

	t.Run("Repositories.Get, a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 200, func(f *faults) { f.set(0.10, 0.10) }, getRepo)
			t.Logf("10 %% 503, 10 %% answer lost: %-44s %v", l.name, got[l])
		}
		assert.Equal(t, got[sdkAlone].calls, got[sdkAlone].requests, "go-github alone: one request per call")
		assert.Greater(t, got[recommended].ok, got[sdkAlone].ok, "httpretry retries a GET whatever the failure")
		// Seed 7 and calls one after the other: the same faults every run.
		assert.Equal(t, figures{calls: 200, ok: 150, requests: 200, first: 1}, got[sdkAlone])
		assert.Equal(t, figures{calls: 200, ok: 198, requests: 265, first: 2}, got[recommended])
	})

	t.Run("Issues.Create, a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 100, func(f *faults) { f.set(0.10, 0.10) }, createIssue)
			t.Logf("10 %% 503, 10 %% answer lost: %-44s %v", l.name, got[l])
		}
		for _, l := range layouts {
			assert.Zero(t, got[l].duplicates, "%s: no issue is created twice", l.name)
		}
		assert.Equal(t, got[sdkAlone].calls, got[sdkAlone].requests, "go-github alone: one request per call")
		// Keys off, a POST is resent only when it provably never reached
		// GitHub: a gateway's 503 does not prove that, so httpretry sends
		// each create once, as go-github alone does, and the lost answers
		// are issues created for calls that failed.
		assert.Equal(t, figures{calls: 100, ok: 74, requests: 100, first: 1, created: 90}, got[sdkAlone])
		assert.Equal(t, figures{calls: 100, ok: 74, requests: 100, first: 1, created: 90}, got[recommended])
	})

	t.Run("Repositories.Get, total outage", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 20, func(f *faults) { f.setOutage(true) }, getRepo)
			t.Logf("every request 503: %-44s %v", l.name, got[l])
		}
		for _, l := range layouts {
			assert.Zero(t, got[l].ok, l.name)
		}
		r := got[recommended]
		assert.LessOrEqual(t, r.first, 4, "httpretry: at most MaxAttempts (4)")
		assert.LessOrEqual(t, r.requests, 4*r.calls, "at most httpretry's MaxAttempts (4) per call")
		assert.Equal(t, 1, got[sdkAlone].first, "go-github alone: one request")
		assert.Equal(t, 4, r.first, "httpretry: MaxAttempts, 4")
		assert.Equal(t, figures{calls: 20, requests: 20, first: 1}, got[sdkAlone])
		assert.Equal(t, figures{calls: 20, requests: 80, first: 4}, r)
	})
}
