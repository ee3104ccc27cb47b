package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is shared by the signer and the server, so a test can let time
// pass between attempts without waiting for it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const reportBody = `{"cpu":0.93}`

// send posts a report through the stack to a verifier that accepts
// timestamps up to 30 s old and whose API fails the first request with 503.
// When wait is set, that much time passes on the shared clock before the
// 503 is answered, as if the retry came after a long Retry-After.
func send(t *testing.T, wait time.Duration, stack func(signer func(http.RoundTripper) http.RoundTripper) http.RoundTripper) (*http.Response, []verdict) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	api := &flakyReports{onFailure: func() { clock.Advance(wait) }}
	v := newVerifier(demoKey, 30*time.Second, clock.Now, api)
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)

	signer := func(base http.RoundTripper) http.RoundTripper {
		return &Signer{Key: demoKey, Base: base, Now: clock.Now}
	}
	client := &http.Client{Transport: stack(signer)}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/reports", strings.NewReader(reportBody))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "report-1")
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp, v.seen()
}

var noWaits = httpretry.Policy{Backoff: backoff.Constant(0)}

// Right: the signer is the retrying transport's Base.
func signedUnderRetries(signer func(http.RoundTripper) http.RoundTripper) http.RoundTripper {
	return &httpretry.Transport{Policy: noWaits, Base: signer(nil)}
}

// Wrong: the signer wraps the retrying transport.
func signedAboveRetries(signer func(http.RoundTripper) http.RoundTripper) http.RoundTripper {
	return signer(&httpretry.Transport{Policy: noWaits})
}

func TestEachAttemptIsSignedFresh(t *testing.T) {
	t.Parallel()
	resp, seen := send(t, time.Minute, signedUnderRetries)

	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, seen, 2)
	for i, vd := range seen {
		assert.Empty(t, vd.Reject, "attempt %d", i+1)
		assert.Equal(t, reportBody, vd.Body, "attempt %d got the whole body", i+1)
	}
	assert.Equal(t, []int{http.StatusServiceUnavailable, http.StatusCreated}, []int{seen[0].Status, seen[1].Status})
	assert.NotEqual(t, seen[0].Nonce, seen[1].Nonce)
	assert.NotEqual(t, seen[0].Timestamp, seen[1].Timestamp, "signed a minute apart, when each was sent")
}

func TestSignerAboveRetriesResendsAStaleSignature(t *testing.T) {
	t.Parallel()
	resp, seen := send(t, time.Minute, signedAboveRetries)

	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a 401 is fatal: retrying ends there")
	require.Len(t, seen, 2)
	assert.Empty(t, seen[0].Reject)
	assert.Equal(t, "stale timestamp", seen[1].Reject)
	assert.Equal(t, seen[0].Timestamp, seen[1].Timestamp, "the same signature, sent twice")
}

func TestSignerAboveRetriesIsAReplayEvenWithoutAWait(t *testing.T) {
	t.Parallel()
	resp, seen := send(t, 0, signedAboveRetries)

	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Len(t, seen, 2)
	assert.Equal(t, "replayed nonce", seen[1].Reject)
}

func TestSignerReadsTheBodyThroughGetBody(t *testing.T) {
	t.Parallel()
	var sent []byte
	var signed *http.Request
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		signed = req
		var err error
		sent, err = io.ReadAll(req.Body)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, err
	})
	req, err := http.NewRequest(http.MethodPut, "http://api.test/reports/1?v=2", bytes.NewReader([]byte(reportBody)))
	require.NoError(t, err)

	resp, err := (&Signer{Key: demoKey, Base: base}).RoundTrip(req)

	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, reportBody, string(sent), "the body reached Base whole")
	assert.Empty(t, req.Header.Get(headerSignature), "the caller's request is not modified")
	v := newVerifier(demoKey, time.Minute, time.Now, nil)
	assert.Empty(t, v.check(signed, []byte(reportBody)), "the signature covers method, path, query and body")
}

func TestSignerRefusesABodyItCannotReread(t *testing.T) {
	t.Parallel()
	body := httpretrytest.NewBody(reportBody)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/reports", body)
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	base := httpretrytest.NewScript()

	_, err = (&Signer{Key: demoKey, Base: base}).RoundTrip(req)

	require.ErrorIs(t, err, errNoGetBody)
	assert.Empty(t, base.Requests())
	assert.Positive(t, body.Closes(), "a RoundTripper closes the body even on error")
}

func TestHTTPRetryGivesTheSignerGetBodyForBufferedBodies(t *testing.T) {
	t.Parallel()
	// A body without GetBody of its own: httpretry buffers it (it is below
	// MaxReplayBytes) and hands each attempt a GetBody, so the signer works.
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(b))
	}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodPost, srv.URL, httpretrytest.NewBody(reportBody))
	require.NoError(t, err)
	client := &http.Client{Transport: &httpretry.Transport{Base: &Signer{Key: demoKey}}}

	resp, err := client.Do(req)

	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{reportBody}, seen)
}
