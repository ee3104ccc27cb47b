package httpretry_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

func TestLogging(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		fake := httpretrytest.NewScript(httpretrytest.RetryAfter(429, "2"), httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Logger: logger, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
			"https://alice:hunter2@api.example.com/v1/charges?api_key=sk_live_123&amount=5", strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer secret-token")
		req.Header.Set("Proxy-Authorization", "Basic cHJveHk=")
		req.Header.Set("Cookie", "session=cookie-secret")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()

		out := buf.String()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, "one record per attempt:\n%s", out)
		assert.Contains(t, lines[0], "level=INFO")
		assert.Contains(t, lines[0], "method=POST")
		assert.Contains(t, lines[0], "url=https://api.example.com/v1/charges?[redacted]")
		assert.Contains(t, lines[0], "attempt=1")
		assert.Contains(t, lines[0], "status=429")
		assert.Contains(t, lines[0], "class=transient")
		assert.Contains(t, lines[0], "delay_source=retry-after")
		assert.Contains(t, lines[1], "delay_source=backoff")
		assert.Contains(t, lines[2], "level=DEBUG")
		assert.Contains(t, lines[2], "stop=success")
		for _, secret := range []string{"alice", "hunter2", "sk_live_123", "amount", "secret-token", "cHJveHk", "cookie-secret"} {
			assert.NotContains(t, out, secret)
		}
	})
}

func TestLoggingGivingUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		fake := httpretrytest.NewScript(httpretrytest.Fail(httpretrytest.DialRefused()))
		tr := &httpretry.Transport{Base: fake, Logger: logger, Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0)}}
		_, err := tr.RoundTrip(get(t, t.Context()))
		require.Error(t, err)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.Len(t, lines, 2)
		assert.Contains(t, lines[1], "level=WARN")
		assert.Contains(t, lines[1], `stop="attempts exhausted"`)
		assert.Contains(t, lines[1], "class=not-processed")
	})
}

func TestOnAttempt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got []httpretry.Attempt
		fake := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(404))
		tr := &httpretry.Transport{Base: fake, OnAttempt: func(a httpretry.Attempt) { got = append(got, a) },
			Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		resp, err := tr.RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, got, 2)
		assert.Equal(t, 1, got[0].N)
		assert.True(t, got[0].Retry)
		assert.Equal(t, httpretry.ClassTransient, got[0].Class)
		assert.Equal(t, httpretry.DelayBackoff, got[0].DelaySource)
		assert.Equal(t, "api.example.com:443", got[0].Host)
		assert.Equal(t, 2, got[1].N)
		assert.False(t, got[1].Retry)
		assert.Equal(t, httpretry.StopFatal, got[1].Stop)
		assert.Equal(t, 404, got[1].Response.StatusCode)
	})
}

// TestLogRedactsURLsInErrors: an attempt's error that quotes the request's
// URL (a Base wrapping an http.Client returns *url.Error) is logged with
// that URL redacted too.
func TestLogRedactsURLsInErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		secretURL := "https://alice:hunter2@api.example.com/v1/x?token=sk_live_123#frag"
		fake := httpretrytest.NewScript(
			httpretrytest.Fail(&url.Error{Op: "Get", URL: secretURL, Err: syscall.ECONNRESET}),
			httpretrytest.Fail(fmt.Errorf("proxy said no to %s and to ftp://bob:pw@files.example.com/a?b=c: %w", secretURL, syscall.ECONNRESET)),
			httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: fake, Logger: logger, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		resp, err := tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		out := buf.String()
		for _, secret := range []string{"alice", "hunter2", "sk_live_123", "token=", "bob", "pw@", "b=c", "frag"} {
			assert.NotContains(t, out, secret)
		}
		assert.Contains(t, out, "https://api.example.com/v1/x?[redacted]")
		assert.Contains(t, out, "ftp://files.example.com/a?[redacted]")
	})
}

// TestLoggingWithoutRetries: a call that allowed one attempt (a health
// check under WithoutRetries) and got a 503 did not exhaust any retries:
// its record says retries were off, at Info, not "attempts exhausted" at
// Warn.
func TestLoggingWithoutRetries(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)), Logger: logger}
	req, err := http.NewRequestWithContext(httpretry.WithoutRetries(t.Context()), http.MethodGet, "https://api.example.com/healthz", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	out := buf.String()
	assert.Contains(t, out, `level=INFO msg="httpretry: attempt"`, out)
	assert.Contains(t, out, `stop="retries off"`, out)
	assert.NotContains(t, out, "exhausted", out)
}
