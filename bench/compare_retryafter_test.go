package bench

// How each library reads Retry-After: which of RFC 9110 §10.2.3's forms
// (delay-seconds, or an HTTP-date in any of the three formats of §5.6.7:
// IMF-fixdate, the obsolete RFC 850 format and asctime) it obeys, on which
// statuses, and how it jitters the wait. Nothing waits: the test reads the
// wait each library schedules and cancels the request's context.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seedhq/httpretry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answering is a Base that answers every attempt with status and header,
// without a network.
func answering(status int, header http.Header) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Body != nil {
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
		return &http.Response{
			StatusCode: status, Status: http.StatusText(status), Header: header.Clone(),
			Body: io.NopCloser(strings.NewReader("")), Request: req, ProtoMajor: 1, ProtoMinor: 1,
		}, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// scheduledWait sends one GET through library name over base and returns
// the wait it schedules before the first retry; the wait itself is cut
// short by cancelling the request. Each library is configured with a
// backoff of 1 s (go-retryablehttp RetryWaitMin 1 s, failsafehttp
// WithBackoff(1 s, 30 s)), so a Retry-After it ignores shows as 1 s;
// httpretry's own backoff is below 100 ms on the first retry. fsJitter is
// failsafehttp's jitter factor, 0 for none.
func scheduledWait(t *testing.T, name string, base http.RoundTripper, fsJitter float64) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://retry-after.test/", nil)
	wait := time.Duration(-1)
	var resp *http.Response
	var err error
	switch name {
	case "httpretry":
		rt := &httpretry.Transport{Base: base, OnAttempt: func(a httpretry.Attempt) {
			if a.Retry {
				wait = a.Delay
			}
			cancel()
		}}
		resp, err = rt.RoundTrip(req)
	case "retryablehttp":
		rt := newRetryableHTTP(base, time.Second).(*retryablehttp.RoundTripper)
		rt.Client.Backoff = func(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
			wait = retryablehttp.DefaultBackoff(lo, hi, n, resp)
			cancel()
			return wait
		}
		resp, err = rt.RoundTrip(req)
	case "failsafehttp":
		b := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).WithBackoff(time.Second, 30*time.Second)
		if fsJitter > 0 {
			b = b.WithJitterFactor(fsJitter)
		}
		p := b.OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) {
			wait = e.Delay
			cancel()
		}).Build()
		resp, err = failsafehttp.NewRoundTripper(base, p).RoundTrip(req)
	}
	if err == nil {
		closeResp(resp)
	} else {
		var ee retrypolicy.ExceededError
		if errors.As(err, &ee) {
			if last, ok := ee.LastResult.(*http.Response); ok {
				closeResp(last)
			}
		}
	}
	require.GreaterOrEqual(t, wait, time.Duration(0), "%s scheduled no retry", name)
	return wait
}

// TestCompareRetryAfterForms: a response asks for about 10 s in each form
// Retry-After can take. httpretry obeys every form, and on any retried
// status. go-retryablehttp obeys delay-seconds and, of the dates, only
// IMF-fixdate (it parses with time.RFC1123), and only on 429 and 503.
// failsafehttp obeys only delay-seconds (strconv.Atoi), on 429 and 503.
// A form a library ignores leaves its own 1 s backoff.
func TestCompareRetryAfterForms(t *testing.T) {
	forms := []struct {
		name   string
		status int
		value  func(at time.Time) string
	}{
		{"delay-seconds", 429, func(time.Time) string { return "10" }},
		{"IMF-fixdate", 429, func(at time.Time) string { return at.UTC().Format(http.TimeFormat) }},
		{"RFC 850", 429, func(at time.Time) string { return at.UTC().Format("Monday, 02-Jan-06 15:04:05 GMT") }},
		{"asctime", 429, func(at time.Time) string { return at.UTC().Format(time.ANSIC) }},
		{"delay-seconds on a 502", 502, func(time.Time) string { return "10" }},
	}
	obeys := map[string][]string{
		"httpretry":     {"delay-seconds", "IMF-fixdate", "RFC 850", "asctime", "delay-seconds on a 502"},
		"retryablehttp": {"delay-seconds", "IMF-fixdate"},
		"failsafehttp":  {"delay-seconds"},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			var obeyed []string
			for _, f := range forms {
				// A date 11 s ahead, whole seconds: between 10 and 11 s from now.
				v := f.value(time.Now().Add(11 * time.Second))
				wait := scheduledWait(t, lib.name, answering(f.status, http.Header{"Retry-After": {v}}), 0)
				t.Logf("%s %q: %v", f.name, v, wait)
				switch {
				case wait >= 9*time.Second && wait <= 13*time.Second:
					obeyed = append(obeyed, f.name)
				case lib.name == "httpretry":
					assert.Less(t, wait, 100*time.Millisecond, "%s: httpretry's own backoff", f.name)
				default:
					assert.Equal(t, time.Second, wait, "%s: its own backoff", f.name)
				}
			}
			assert.Equal(t, obeys[lib.name], obeyed, "forms obeyed")
		})
	}
}

// TestCompareRetryAfterJitter: a 429 with Retry-After: 10, 50 times.
// httpretry jitters a server-requested wait upward only, by up to 10 %:
// every wait in [10 s, 11 s], never earlier than asked. failsafehttp applies
// its jitter factor (0.5 here) to the Retry-After wait in both directions,
// so some retries are scheduled before the server said to come back.
// go-retryablehttp's default backoff returns the header's value as is.
func TestCompareRetryAfterJitter(t *testing.T) {
	const asked = 10 * time.Second
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for range 50 {
				w := scheduledWait(t, lib.name, answering(429, http.Header{"Retry-After": {"10"}}), 0.5)
				lo, hi = min(lo, w), max(hi, w)
			}
			t.Logf("Retry-After: 10 → waits from %v to %v", lo, hi)
			switch lib.name {
			case "httpretry":
				assert.GreaterOrEqual(t, lo, asked, "never earlier than asked")
				assert.Greater(t, hi, asked, "jittered upward")
				assert.LessOrEqual(t, hi, asked*11/10, "by at most 10 %")
			case "retryablehttp":
				assert.Equal(t, asked, lo)
				assert.Equal(t, asked, hi)
			case "failsafehttp":
				assert.Less(t, lo, asked, "some retries earlier than the server asked")
				assert.Greater(t, hi, asked)
				assert.GreaterOrEqual(t, lo, asked/2)
				assert.LessOrEqual(t, hi, asked*3/2)
			}
		})
	}
}
