package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// fakeGitHub is a small stand-in for the GitHub REST API (the enterprise
// form, under /api/v3/) that fails the way the real one does under load: a
// load balancer's 502, a 429 with Retry-After, and GitHub's secondary rate
// limit, a 403 with Retry-After. Each route fails its first requests as
// scripted, then answers; every request is recorded.
type fakeGitHub struct {
	// retryAfter is the Retry-After value the rate-limited answers carry.
	// GitHub sends whole seconds, often 60; the demo uses 1 and tests 0.
	retryAfter string

	mu     sync.Mutex
	faults map[string][]fault // route → answers for its first requests
	seen   []seenRequest
	issues []string // titles of the issues created
}

// fault is one scripted failure.
type fault struct {
	status int
	header map[string]string
	body   string
}

// seenRequest is what the fake saw of one request.
type seenRequest struct {
	Route  string
	Method string
	Path   string
	Header http.Header
}

// Routes, as registered on the mux; also the keys of faults.
const (
	routeRepo        = "GET /api/v3/repos/{owner}/{repo}"
	routeListIssues  = "GET /api/v3/repos/{owner}/{repo}/issues"
	routeSearch      = "GET /api/v3/search/issues"
	routeCreateIssue = "POST /api/v3/repos/{owner}/{repo}/issues"
)

// newFakeGitHub returns the fake with the failures the demo walks through.
func newFakeGitHub(retryAfter string) *fakeGitHub {
	return &fakeGitHub{
		retryAfter: retryAfter,
		faults: map[string][]fault{
			routeRepo:       {badGateway, badGateway},
			routeListIssues: {rateLimited(retryAfter)},
			routeSearch: {{
				status: http.StatusForbidden,
				header: map[string]string{"Retry-After": retryAfter},
				body: `{"message":"You have exceeded a secondary rate limit. Please wait before retrying.",` +
					`"documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`,
			}},
			// The create is applied, then the answer is lost at the gateway.
			routeCreateIssue: {badGateway},
		},
	}
}

func (f *fakeGitHub) start() *httptest.Server { return httptest.NewServer(f.handler()) }

// fail scripts more failures for route's next requests.
func (f *fakeGitHub) fail(route string, faults ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[route] = append(f.faults[route], faults...)
}

// rateLimited is GitHub's 429 with a Retry-After of seconds.
func rateLimited(seconds string) fault {
	return fault{
		status: http.StatusTooManyRequests,
		header: map[string]string{"Retry-After": seconds},
		body:   `{"message":"API rate limit exceeded"}`,
	}
}

var badGateway = fault{status: http.StatusBadGateway, body: "<html><body><h1>502 Bad Gateway</h1></body></html>"}

// handler serves the fake's routes.
func (f *fakeGitHub) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(routeRepo, f.handle(routeRepo, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": 1, "name": r.PathValue("repo"), "full_name": r.PathValue("owner") + "/" + r.PathValue("repo"),
			"stargazers_count": 42,
		})
	}))
	mux.HandleFunc(routeListIssues, f.handle(routeListIssues, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []map[string]any{{"number": 6, "title": "retry budget per host"}})
	}))
	mux.HandleFunc(routeSearch, f.handle(routeSearch, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"total_count": 1, "incomplete_results": false,
			"items": []map[string]any{{"number": 6, "title": "retry budget per host"}},
		})
	}))
	mux.HandleFunc(routeCreateIssue, f.handle(routeCreateIssue, func(w http.ResponseWriter, r *http.Request) {
		// Unreachable in the demo: the first request gets the 502.
		writeJSON(w, http.StatusCreated, map[string]any{"number": 6 + len(f.issues)})
	}))
	return mux
}

// handle records each request, applies a create before any scripted
// failure (the failure is the answer getting lost, not the write), and
// answers with the route's next scripted failure or with ok.
func (f *fakeGitHub) handle(route string, ok http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen = append(f.seen, seenRequest{Route: route, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
		if route == routeCreateIssue {
			var req struct{ Title string }
			_ = json.Unmarshal(body, &req)
			f.issues = append(f.issues, req.Title)
		}
		if q := f.faults[route]; len(q) > 0 {
			flt := q[0]
			f.faults[route] = q[1:]
			for k, v := range flt.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(flt.status)
			fmt.Fprint(w, flt.body)
			return
		}
		ok(w, r)
	}
}

// requests returns what the fake saw for route.
func (f *fakeGitHub) requests(route string) []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seenRequest
	for _, s := range f.seen {
		if s.Route == route {
			out = append(out, s)
		}
	}
	return out
}

// created returns the titles of the issues the fake created.
func (f *fakeGitHub) created() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.issues...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
