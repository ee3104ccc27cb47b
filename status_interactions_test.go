package httpretry_test

// Regression tests for issue 19, "Trust where features meet": one test (or a
// small group) per defect, through the public API only. This file holds the
// defects about what is retried and what counts (10, 11, 12, 14) and, at the
// bottom, the helpers every interactions_*_test.go file shares. The others:
// interactions_body_test.go (1, 2, 3, 8), interactions_release_test.go (4, 6,
// 7), interactions_hosts_test.go (9, 13, 15) and
// interactions_hedgepanic_test.go (5), kept apart because a panic on a
// goroutine of the Transport's ends the whole test binary.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/config"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Defect 10 (a): a tracing layer in Base that looks up the request's
// httptrace.ClientTrace and installs its own, as otelhttp does, above a
// request signer that fails before net/http is ever called. → The signer's
// permanent error is sent once: exactly one attempt, whatever the layers
// above it did with the context.
func TestTracingLayerDoesNotMakeASignerErrorTransient(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errSigner := errors.New("signer: no credentials for this account")
		var signed atomic.Int32
		signer := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
			signed.Add(1)
			return nil, errSigner
		})
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: ixTracingLayer{next: signer}, OnAttempt: log.Record}

		resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com/v1/items", nil))
		require.Nil(t, resp)
		require.ErrorIs(t, err, errSigner)
		assert.EqualValues(t, 1, signed.Load(), "a signer's error repeats on every attempt: it is not retried")
		assert.Len(t, log.Attempts(), 1)
	})
}

// Defect 10 (b): a Base that wraps an http.Client, whose own redirect
// policy refuses a redirect, or gives up after 10 of them. → These are the
// client's own policy errors, fatal: one attempt, one request to the
// redirecting URL, and the client's error reaches the caller.
func TestClientPolicyErrorsInBaseAreNotRetried(t *testing.T) {
	t.Parallel()
	var starts, loops atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		starts.Add(1)
		http.Redirect(w, r, "/next", http.StatusFound)
	})
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "next") })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		loops.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	t.Run("CheckRedirect refuses", func(t *testing.T) {
		errNoRedirects := errors.New("redirects are not followed here")
		client := &http.Client{Transport: srv.Client().Transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return errNoRedirects }}
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: ixClientBase{client}, Policy: ixNoWait, OnAttempt: log.Record}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, srv.URL+"/start", nil))
		require.Nil(t, resp)
		require.ErrorIs(t, err, errNoRedirects)
		assert.Len(t, log.Attempts(), 1, "the client's redirect policy says the same on every attempt")
		assert.EqualValues(t, 1, starts.Load())
	})
	t.Run("stopped after 10 redirects", func(t *testing.T) {
		client := &http.Client{Transport: srv.Client().Transport}
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: ixClientBase{client}, Policy: ixNoWait, OnAttempt: log.Record}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, srv.URL+"/loop", nil))
		require.Nil(t, resp)
		require.Error(t, err)
		assert.Len(t, log.Attempts(), 1, "too many redirects is fatal")
		assert.EqualValues(t, 10, loops.Load(), "one attempt: the first request and the 9 redirects followed before net/http stops at the tenth")
	})
}

// An http.Client in Base follows a redirect after the server processed the
// request, and the follow-up fails to dial (its host is down). The client
// reports the dial error in a *url.Error, which alone would say "never
// sent"; but the first request was written and answered. → An unkeyed PATCH
// and a POST with keys off are sent once: a dial error inside a client's
// *url.Error proves nothing was processed only when the attempt wrote
// nothing.
func TestRedirectThenDialErrorIsNotResentUnkeyed(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // its port now refuses connections
	var applied atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		applied.Add(1)
		http.Redirect(w, r, downURL+"/receipt", http.StatusSeeOther)
	}))
	t.Cleanup(srv.Close)
	for _, method := range []string{http.MethodPatch, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			before := applied.Load()
			client := &http.Client{Transport: srv.Client().Transport}
			var log httpretrytest.AttemptLog
			p := ixNoWait
			p.Keys.Disabled = true
			tr := &httpretry.Transport{Base: ixClientBase{client}, Policy: p, OnAttempt: log.Record}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := tr.RoundTrip(ixReq(t, ctx, method, srv.URL+"/pay", strings.NewReader(`{"amount":1}`)))
			require.Nil(t, resp)
			require.Error(t, err)
			assert.EqualValues(t, 1, applied.Load()-before, "the request the server processed is not sent again")
			assert.Len(t, log.Attempts(), 1)
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, httpretry.StopNotReplayable, re.Stop, "a transient failure of an unsafe request without a key")
		})
	}
	t.Run("GET is retried", func(t *testing.T) {
		before := applied.Load()
		client := &http.Client{Transport: srv.Client().Transport}
		var log httpretrytest.AttemptLog
		tr := &httpretry.Transport{Base: ixClientBase{client}, Policy: ixNoWait, OnAttempt: log.Record}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, srv.URL+"/pay", nil))
		require.Nil(t, resp)
		require.Error(t, err)
		assert.Len(t, log.Attempts(), 4, "a safe request is retried on a transient failure, up to the default MaxAttempts")
		assert.EqualValues(t, 4, applied.Load()-before)
	})
}

// The same through an http.Client whose Transport is not net/http's (an
// SDK's, HTTP/3, a test double): no httptrace hook fires, so the attempt's
// progress says nothing. → The *url.Error names the follow-up's URL, not
// the request's: the PATCH the server processed is sent once.
func TestRedirectThenDialErrorWithoutTraceHooksIsNotResent(t *testing.T) {
	t.Parallel()
	var applied atomic.Int32
	inner := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Host == "api.example.com" {
			applied.Add(1)
			resp := ixResp(req, http.StatusSeeOther)
			resp.Header.Set("Location", "https://receipts.example.com/r/1")
			return resp, nil
		}
		return nil, httpretrytest.DialRefused()
	})
	p := ixNoWait
	p.Keys.Disabled = true
	tr := &httpretry.Transport{Base: ixClientBase{&http.Client{Transport: inner}}, Policy: p}
	resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodPatch, "https://api.example.com/pay", strings.NewReader(`{"amount":1}`)))
	require.Nil(t, resp)
	require.Error(t, err)
	assert.EqualValues(t, 1, applied.Load(), "the PATCH the server processed is not sent again")
}

// An HTTP/2 REFUSED_STREAM proves the server processed nothing, after the
// headers were written too, whether Base returns it as it is or an
// http.Client reports it in a *url.Error. → An unkeyed PATCH is sent again
// in both cases.
func TestRefusedStreamInsideAClientsURLErrorIsRetried(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	inner := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if tr := httptrace.ContextClientTrace(req.Context()); tr != nil {
			tr.GetConn(req.URL.Host)
			tr.WroteHeaders()
		}
		if n.Add(1) == 1 {
			return nil, ixStreamError{StreamID: 1, Code: 7}
		}
		return ixResp(req, http.StatusOK), nil
	})
	p := ixNoWait
	p.Keys.Disabled = true
	for _, name := range []string{"net/http-like Base", "http.Client Base"} {
		t.Run(name, func(t *testing.T) {
			n.Store(0)
			var base http.RoundTripper = inner
			if name == "http.Client Base" {
				base = ixClientBase{&http.Client{Transport: inner}}
			}
			tr := &httpretry.Transport{Base: base, Policy: p}
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodPatch, "https://api.example.com/items/1", strings.NewReader(`{}`)))
			require.NoError(t, err)
			resp.Body.Close()
			assert.EqualValues(t, 2, n.Load())
		})
	}
}

// ixStreamError has the shape of net/http's HTTP/2 stream error (Code 7:
// REFUSED_STREAM).
type ixStreamError struct{ StreamID, Code uint32 }

func (e ixStreamError) Error() string { return "stream error: REFUSED_STREAM" }

// Post/Redirect/Get to the resource itself (PATCH /items/1 → 303 See Other,
// Location: /items/1) through an http.Client whose Transport fires no
// httptrace hook; the follow-up GET cannot dial. The *url.Error names the
// request's own URL and progress is "none", so the PATCH the server
// processed is classed not-processed and sent again, without a key.
func TestRedirectToSameURLThenDialErrorIsNotResent(t *testing.T) {
	t.Parallel()
	var applied, gets atomic.Int32
	inner := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch {
			applied.Add(1)
			resp := ixResp(req, http.StatusSeeOther)
			resp.Header.Set("Location", "https://api.example.com/items/1")
			return resp, nil
		}
		gets.Add(1)
		return nil, httpretrytest.DialRefused()
	})
	p := ixNoWait
	p.Keys.Disabled = true
	tr := &httpretry.Transport{Base: ixClientBase{&http.Client{Transport: inner}}, Policy: p}
	resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodPatch, "https://api.example.com/items/1", strings.NewReader(`{"qty":1}`)))
	require.Nil(t, resp)
	require.Error(t, err)
	assert.EqualValues(t, 1, applied.Load(), "the PATCH the server processed is not sent again")
}

// A POST whose URL carries a password, through an http.Client whose
// Transport, as net/http's does, asks for a connection (GetConn) and
// cannot dial (no redirect). http.Client names the URL in its *url.Error
// with the password as "***", where URL.Redacted writes "xxxxx". → The
// error is recognised as the request's own: the unsent POST is sent again.
func TestDialErrorOfAURLWithAPasswordIsNotProcessed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	inner := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.GetConn != nil {
			tr.GetConn(req.URL.Host)
		}
		if calls.Add(1) == 1 {
			return nil, httpretrytest.DialRefused()
		}
		return ixResp(req, http.StatusOK), nil
	})
	p := ixNoWait
	p.Keys.Disabled = true
	tr := &httpretry.Transport{Base: ixClientBase{&http.Client{Transport: inner}}, Policy: p}
	resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodPost, "https://user:secret@api.example.com/charges", strings.NewReader(`{}`)))
	require.NoError(t, err, "a POST that never dialled is sent again")
	resp.Body.Close()
	assert.EqualValues(t, 2, calls.Load())
}

// Defect 10 (c): whether an unkeyed POST was written is known from the
// public httptrace hooks. A Base that got as far as asking for a
// connection (GetConn) but never wrote the request (no WroteHeaders) and
// then failed with an error of no known type → the POST provably was not
// sent: it IS retried. Once WroteHeaders was called → it may have been
// processed: it is not. The caller's own ClientTrace still sees every
// attempt's hooks: the Transport's are composed with it.
func TestUnwrittenUnkeyedPostIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		written  bool
		attempts int
	}{
		{"connection asked for, nothing written", false, 2},
		{"headers written", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				errConn := errors.New("connection lost")
				var sent atomic.Int32
				base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					io.Copy(io.Discard, req.Body)
					req.Body.Close()
					trace := httptrace.ContextClientTrace(req.Context())
					if trace != nil && trace.GetConn != nil {
						trace.GetConn(req.URL.Host)
					}
					if sent.Add(1) > 1 {
						return ixResp(req, http.StatusOK), nil
					}
					if tc.written && trace != nil && trace.WroteHeaders != nil {
						trace.WroteHeaders()
					}
					return nil, errConn
				})
				var log httpretrytest.AttemptLog
				tr := &httpretry.Transport{Base: base, OnAttempt: log.Record,
					Policy: httpretry.Policy{Keys: httpretry.KeyPolicy{Disabled: true}}}
				var callerGetConns atomic.Int32
				ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
					GetConn: func(string) { callerGetConns.Add(1) }})

				resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodPost, "https://payments.example.com/v1/charges", strings.NewReader(`{"amount":100}`)))
				if tc.attempts == 2 {
					require.NoError(t, err, "a POST that was never written is safe to send again")
					resp.Body.Close()
				} else {
					require.ErrorIs(t, err, errConn)
				}
				assert.EqualValues(t, tc.attempts, sent.Load())
				assert.Len(t, log.Attempts(), tc.attempts)
				assert.EqualValues(t, tc.attempts, callerGetConns.Load(), "the caller's ClientTrace sees every attempt's hooks")
			})
		})
	}
}

// Defect 11: a request signer under the Transport that fails before the
// connection (it never calls GetConn) says nothing about the host. → With
// Breaker{ConsecutiveFailures: 2}, ten calls that each fail in the signer
// all get the signer's error; the breaker never opens, so none gets
// ErrCircuitOpen, and each reaches the signer.
func TestSignerErrorsDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errSigner := errors.New("signer: key expired")
		var signed atomic.Int32
		signer := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
			signed.Add(1)
			return nil, errSigner
		})
		tr := &httpretry.Transport{Base: signer, Policy: httpretry.Policy{
			Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 2}}}
		for i := range 10 {
			resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://storage.example.com/bucket/object", nil))
			require.Nil(t, resp)
			require.NotErrorIs(t, err, httpretry.ErrCircuitOpen, "call %d: the breaker opened on the signer's errors", i+1)
			require.ErrorIs(t, err, errSigner, "call %d", i+1)
		}
		assert.EqualValues(t, 10, signed.Load(), "every call reached the signer")
	})
}

// Defect 12: a 409 means "the original is still in flight" only when an
// earlier attempt of the same call carried the same key, or the caller set
// the key itself. → A PUT (keyed by default) answered 409 at once, as S3's
// CreateBucket on an existing name is, takes 1 attempt and the 409 comes
// back; 503 then 409 then 201 takes 3 (the 409 follows an attempt with the
// same key); with a key the caller set, 409 then 201 takes 2.
func TestConflictIsRetriedOnlyAfterTheSameKeyWasSent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		callerKey string
		script    []httpretrytest.Outcome
		attempts  int
		status    int
	}{
		{"409 at once: already exists", "", []httpretrytest.Outcome{httpretrytest.Status(409), httpretrytest.Status(201)}, 1, 409},
		{"409 after a 503 with the same key", "", []httpretrytest.Outcome{httpretrytest.Status(503), httpretrytest.Status(409), httpretrytest.Status(201)}, 3, 201},
		{"409 with the caller's key", "caller-key-1", []httpretrytest.Outcome{httpretrytest.Status(409), httpretrytest.Status(201)}, 2, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := httpretrytest.NewScript(tc.script...)
				tr := &httpretry.Transport{Base: up}
				req := ixReq(t, t.Context(), http.MethodPut, "https://s3.example.com/new-bucket", nil)
				if tc.callerKey != "" {
					req.Header.Set("Idempotency-Key", tc.callerKey)
				}
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.status, resp.StatusCode)
				httpretrytest.CheckAttempts(t, up.Requests(), tc.attempts)
			})
		})
	}
}

// Defect 14: extreme values that pass Validate and config.Parse must never
// panic or silently change meaning. → Each is either rejected, with an
// error that wraps ErrInvalidPolicy or config.ErrInvalid and names the
// field, or works: a breaker Window of 2,500,000 h does not panic on the
// first request (which fails, so the host gets its breaker, then
// succeeds); a LimitMax near math.MaxInt admits requests; MaxRetryAfter
// math.MaxInt64 with a Retry-After date in year 9999 never waits less than
// the server asked (the call has an hour left, so the user expects it to
// stop with the 503 in hand, or wait the whole time: either is fine, a
// retry after the backoff delay is not). The same through package config.
func TestExtremeValuesAreRejectedOrWork(t *testing.T) {
	t.Parallel()
	const year9999 = "Fri, 31 Dec 9999 23:59:59 GMT"
	for _, tc := range []struct {
		name        string
		policy      httpretry.Policy
		config      string
		field       string // the Policy field's name, in a rejection
		configField string // the config field's name, in a rejection
		base        func() http.RoundTripper
		check       func(t *testing.T, tr *httpretry.Transport, log *httpretrytest.AttemptLog)
	}{
		{
			name:        "breaker Window of 2,500,000 h",
			policy:      httpretry.Policy{Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 5, Window: 2_500_000 * time.Hour}},
			config:      `{"breaker": {"consecutive_failures": 5, "window": "2500000h"}}`,
			field:       "Window",
			configField: "window",
			base: func() http.RoundTripper {
				return httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200))
			},
			check: func(t *testing.T, tr *httpretry.Transport, _ *httpretrytest.AttemptLog) {
				for i := range 2 {
					var resp *http.Response
					var err error
					v := ixPanicked(func() {
						resp, err = tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com/", nil))
					})
					require.Nil(t, v, "request %d panicked: %v", i+1, v)
					require.NoError(t, err)
					resp.Body.Close()
					assert.Equal(t, 200, resp.StatusCode)
				}
			},
		},
		{
			name:        "LimitMax of math.MaxInt",
			policy:      httpretry.Policy{Overload: httpretry.OverloadPolicy{Limit: true, LimitMax: math.MaxInt}},
			config:      fmt.Sprintf(`{"overload": {"limit": true, "limit_max": %d}}`, math.MaxInt),
			field:       "LimitMax",
			configField: "limit_max",
			base:        func() http.RoundTripper { return httpretrytest.NewScript(httpretrytest.Status(200)) },
			check: func(t *testing.T, tr *httpretry.Transport, _ *httpretrytest.AttemptLog) {
				for i := range 3 {
					resp, err := tr.RoundTrip(ixReq(t, t.Context(), http.MethodGet, "https://api.example.com/", nil))
					require.NoError(t, err, "request %d is admitted", i+1)
					resp.Body.Close()
				}
			},
		},
		{
			name:        "MaxRetryAfter of math.MaxInt64, Retry-After in year 9999",
			policy:      httpretry.Policy{MaxRetryAfter: math.MaxInt64},
			config:      fmt.Sprintf(`{"max_retry_after": %q}`, time.Duration(math.MaxInt64).String()),
			field:       "MaxRetryAfter",
			configField: "max_retry_after",
			base: func() http.RoundTripper {
				return httpretrytest.NewScript(httpretrytest.RetryAfter(503, year9999), httpretrytest.Status(200))
			},
			check: func(t *testing.T, tr *httpretry.Transport, log *httpretrytest.AttemptLog) {
				asked, ok := httpretry.ParseRetryAfter(year9999, time.Now())
				require.True(t, ok)
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				resp, err := tr.RoundTrip(ixReq(t, ctx, http.MethodGet, "https://api.example.com/", nil))
				attempts := log.Attempts()
				require.NotEmpty(t, attempts)
				if a := attempts[0]; a.Retry {
					assert.GreaterOrEqual(t, a.Delay, asked,
						"the wait before the retry (%v, from %v) is shorter than the server asked", a.Delay, a.DelaySource)
					return
				}
				require.NoError(t, err, "a call that does not wait stops with the response in hand")
				resp.Body.Close()
				assert.Equal(t, 503, resp.StatusCode)
			},
		},
	} {
		t.Run(tc.name+"/Policy", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log httpretrytest.AttemptLog
				tr := &httpretry.Transport{Base: tc.base(), Policy: tc.policy, OnAttempt: log.Record}
				if err := tr.Validate(); err != nil {
					assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
					assert.Contains(t, err.Error(), tc.field, "a rejection names the field")
					return
				}
				tc.check(t, tr, &log)
			})
		})
		t.Run(tc.name+"/config", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg, err := config.Parse([]byte(tc.config))
				var tr *httpretry.Transport
				if err == nil {
					tr, err = cfg.Transport()
				}
				if err != nil {
					assert.True(t, errors.Is(err, httpretry.ErrInvalidPolicy) || errors.Is(err, config.ErrInvalid), "%v", err)
					assert.Contains(t, err.Error(), tc.configField, "a rejection names the field")
					return
				}
				var log httpretrytest.AttemptLog
				tr.Base, tr.OnAttempt = tc.base(), log.Record
				tc.check(t, tr, &log)
			})
		})
	}
}

// Helpers shared by the interactions_*_test.go files.

// ixNoWait is the policy of the tests over real sockets, where the fake
// clock of synctest cannot drive the network: no wait between attempts.
var ixNoWait = httpretry.Policy{Backoff: backoff.Constant(0)}

// errIxPanic is what the panicking Bases and hooks of these tests panic
// with.
var errIxPanic = errors.New("interactions test: deliberate panic")

// ixPanicked runs f and returns what it panicked with, nil if it did not.
func ixPanicked(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// ixIsOurPanic reports whether v is errIxPanic, itself or wrapped, as a
// Transport that re-raises a panic on the caller's goroutine may wrap it.
func ixIsOurPanic(v any) bool {
	err, ok := v.(error)
	return ok && errors.Is(err, errIxPanic)
}

// ixReq returns a request for url with body, failing the test if it cannot
// be built.
func ixReq(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	return req
}

// ixResp returns an empty response with status code to req.
func ixResp(req *http.Request, code int) *http.Response {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: req}
}

// ixRespBody returns a response with status code to req whose body is b.
func ixRespBody(req *http.Request, code int, b io.ReadCloser) *http.Response {
	resp := ixResp(req, code)
	resp.Body = b
	return resp
}

// ixPayload returns n bytes that differ from offset to offset, so that a
// body sent from the wrong position does not compare equal.
func ixPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// ixSameBytes checks got equals want without printing megabytes when it
// does not.
func ixSameBytes(t *testing.T, want, got []byte, msgAndArgs ...any) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	return assert.Fail(t, fmt.Sprintf("got %d bytes (sha256 %x), want %d bytes (sha256 %x)",
		len(got), sha256.Sum256(got), len(want), sha256.Sum256(want)), msgAndArgs...)
}

// ixTracingLayer is a Base layer that does what otelhttp does with a
// client trace: it installs an httptrace.ClientTrace of its own, which
// WithClientTrace composes with the one already in the request's context
// (looking that one up), before calling next.
type ixTracingLayer struct{ next http.RoundTripper }

func (l ixTracingLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GetConn: func(string) {},
		GotConn: func(httptrace.GotConnInfo) {},
	})
	return l.next.RoundTrip(req.WithContext(ctx))
}

// ixClientBase is a Base that sends each attempt through an http.Client,
// as SDK adapters do: the client's redirect policy runs inside Base.
type ixClientBase struct{ c *http.Client }

func (b ixClientBase) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.c.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close() // Do returns the last response with a CheckRedirect error
		}
		return nil, err
	}
	return resp, nil
}
