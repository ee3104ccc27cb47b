package bench

// Behaviour of go-retryablehttp v0.7.8 and failsafe-go v0.9.8's failsafehttp
// next to httpretry, observed against loopback servers. Each test asserts
// what each library does today; docs/comparison-tests.md tabulates them.
// Nothing waits: backoffs are zero, and the one-hour Retry-After is caught
// when the library schedules it.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seedhq/httpretry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted is a server that answers with statuses in turn (the last one
// repeats) and records what it received.
type scripted struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	header   http.Header // added to every answer
	got      int
	keys     []string // Idempotency-Key of each request received
	bodies   []string
}

func newScripted(t *testing.T, statuses ...int) *scripted {
	s := &scripted{statuses: statuses, header: http.Header{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		status := s.statuses[min(s.got, len(s.statuses)-1)]
		s.got++
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		for k, v := range s.header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		io.WriteString(w, "answer "+http.StatusText(status))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func closeResp(resp *http.Response) {
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestCompareCallerRequestBody: the RoundTripper contract says RoundTrip
// must not modify the request. Both other libraries assign the caller's
// req.Body (failsafehttp whatever the request's context, unless a policy
// such as a timeout gives each attempt a context of its own).
func TestCompareCallerRequestBody(t *testing.T) {
	modifies := map[string]bool{"httpretry": false, "retryablehttp": true, "failsafehttp": true}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 200)
			rt := lib.new(newBare(), 0)
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
			require.NoError(t, err)
			orig := req.Body
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			closeResp(resp)
			assert.Equal(t, modifies[lib.name], req.Body != orig, "req.Body replaced")
		})
	}
	// failsafehttp assigns req.Body whatever the request's context; only
	// when a policy gives each attempt a context of its own (a timeout
	// policy here) does it send a copy of the request.
	for _, c := range []struct {
		name     string
		policies []failsafe.Policy[*http.Response]
		modifies bool
	}{
		{"failsafehttp-cancellable-context", nil, true},
		{"failsafehttp-timeout-policy", []failsafe.Policy[*http.Response]{timeout.New[*http.Response](time.Minute)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newScripted(t, 200)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("payload"))
			require.NoError(t, err)
			orig := req.Body
			policies := append([]failsafe.Policy[*http.Response]{failsafehttp.NewRetryPolicyBuilder().Build()}, c.policies...)
			resp, err := failsafehttp.NewRoundTripper(newBare(), policies...).RoundTrip(req)
			require.NoError(t, err)
			closeResp(resp)
			assert.Equal(t, c.modifies, req.Body != orig, "req.Body replaced")
		})
	}
}

// TestCompareRetryAfterHour: a 429 asking for Retry-After: 3600. httpretry
// returns the 429 at once (its ceiling is 60 s). The others schedule the
// full hour, above their own maximum backoff; the test sees the requested
// wait in their hooks and cancels the context instead of waiting.
func TestCompareRetryAfterHour(t *testing.T) {
	type seen struct {
		wait time.Duration
		resp *http.Response
		err  error
	}
	run := map[string]func(t *testing.T, url string) seen{
		"httpretry": func(t *testing.T, url string) seen {
			var s seen
			rt := &httpretry.Transport{Base: newBare(), OnAttempt: func(a httpretry.Attempt) {
				assert.Equal(t, httpretry.StopRetryAfter, a.Stop)
				s.wait = a.Delay
			}}
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			s.resp, s.err = rt.RoundTrip(req)
			return s
		},
		"retryablehttp": func(t *testing.T, url string) seen {
			var s seen
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := newRetryableHTTP(newBare(), time.Second).(*retryablehttp.RoundTripper)
			c.Client.Backoff = func(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
				s.wait = retryablehttp.DefaultBackoff(lo, hi, n, resp)
				cancel() // its timer is armed for s.wait; end the wait now
				return s.wait
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			s.resp, s.err = c.RoundTrip(req)
			return s
		},
		"failsafehttp": func(t *testing.T, url string) seen {
			var s seen
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBackoff(time.Second, 30*time.Second).
				OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) {
					s.wait = e.Delay
					cancel()
				}).Build()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			s.resp, s.err = failsafehttp.NewRoundTripper(newBare(), p).RoundTrip(req)
			return s
		},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 429, 200)
			srv.header.Set("Retry-After", "3600")
			s := run[lib.name](t, srv.URL)
			defer closeResp(s.resp)
			assert.Equal(t, 1, srv.received(), "no second attempt reached the server")
			if lib.name == "httpretry" {
				assert.Zero(t, s.wait, "nothing scheduled")
				require.NoError(t, s.err)
				assert.Equal(t, 429, s.resp.StatusCode, "the server's answer is returned at once")
				return
			}
			assert.Equal(t, time.Hour, s.wait, "the hour is scheduled, uncapped")
			assert.ErrorIs(t, s.err, context.Canceled)
		})
	}
}
