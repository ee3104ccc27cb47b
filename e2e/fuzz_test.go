package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// FuzzServerWaitHints sends, through a real socket, a response carrying
// fuzzed Retry-After and RateLimit headers, and checks the transport's
// promises end to end, after net/http has parsed and canonicalised the
// headers: exactly one outcome; no wait above MaxRetryAfter; and a wait
// that Retry-After asks for, when it is obeyed, never shortened.
// The parsers themselves are fuzzed in the root module.
func FuzzServerWaitHints(f *testing.F) {
	for _, seed := range []struct {
		status     uint8
		retryAfter string
		rateLimit  string
	}{
		{0, "0", ""}, {1, "1", ""}, {2, "Sun, 06 Nov 1994 08:49:37 GMT", ""},
		{3, "Sunday, 06-Nov-94 08:49:37 GMT", ""}, {4, "Sun Nov  6 08:49:37 1994", ""},
		{5, "", `"default";r=0;t=0`}, {6, "-1", "garbage;;=,"}, {0, "99999999999999999999", `"a";r=0;t=1`},
		{1, "0, 5", `"a";t=0, "b";r=3;t=9`}, {7, "", ""},
	} {
		f.Add(seed.status, seed.retryAfter, seed.rateLimit)
	}
	statuses := []int{503, 429, 500, 502, 504, 408, 425, 200, 404, 409}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Attempt") != "1" {
			io.WriteString(w, "ok")
			return
		}
		w.Header()["Retry-After"] = r.Header.Values("X-Retry-After")
		w.Header()["Ratelimit"] = r.Header.Values("X-Ratelimit")
		w.WriteHeader(statuses[int(r.Header.Get("X-Status")[0]-'a')])
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	const maxWait = 20 * time.Millisecond

	f.Fuzz(func(t *testing.T, status uint8, retryAfter, rateLimit string) {
		if !validHeaderValue(retryAfter) || !validHeaderValue(rateLimit) {
			return
		}
		rec := &recorder{}
		rt := rec.transport(base, httpretry.Policy{
			MaxAttempts: 2, Backoff: backoff.Constant(0), MaxRetryAfter: maxWait,
			AttemptHeader: "X-Attempt", NewBudget: httpretry.NoBudget,
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		req.Header.Set("X-Status", string(rune('a'+int(status)%len(statuses))))
		if retryAfter != "" {
			req.Header.Set("X-Retry-After", retryAfter)
		}
		if rateLimit != "" {
			req.Header.Set("X-Ratelimit", rateLimit)
		}
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		elapsed := time.Since(start)
		if (resp == nil) == (err == nil) {
			t.Fatalf("response %v and error %v: want exactly one", resp != nil, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		if elapsed > time.Second {
			t.Errorf("took %v with MaxRetryAfter %v", elapsed, maxWait)
		}
		for _, a := range rec.all() {
			if a.retry && a.delay > maxWait+maxWait/10 {
				t.Errorf("waited %v (%s), above MaxRetryAfter %v", a.delay, a.source, maxWait)
			}
			// A date is read against the clock when the response arrives,
			// a little after start: allow for that.
			if d, ok := httpretry.ParseRetryAfter(retryAfter, start); ok && a.retry && d <= maxWait && a.delay < d-5*time.Millisecond {
				t.Errorf("Retry-After %q asks for %v, waited %v", retryAfter, d, a.delay)
			}
		}
	})
}

// validHeaderValue reports whether net/http would send v as a header value
// unchanged: no control characters, no leading or trailing space.
func validHeaderValue(v string) bool {
	return v == strings.TrimSpace(v) && !strings.ContainsFunc(v, func(r rune) bool {
		return r < ' ' && r != '\t' || r == 0x7f || r >= 0x80
	})
}
