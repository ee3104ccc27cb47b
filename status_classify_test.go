package httpretry_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// streamInfo has a field named like an HTTP/2 stream error's.
type streamInfo struct {
	StreamID uint32
	Code     uint32
}

// embedsNilStream embeds a pointer to streamInfo, which is nil in the
// values below: its promoted fields cannot be read.
type embedsNilStream struct {
	*streamInfo
	msg string
}

func (e embedsNilStream) Error() string { return e.msg }

type codeOnly struct{ Code uint32 }

// embedsNilCode promotes a Code field through a nil pointer.
type embedsNilCode struct{ *codeOnly }

func (embedsNilCode) Error() string { return "coded" }

// nilUnwrapper panics in Unwrap when its pointer is nil.
type nilUnwrapper struct{ err error }

func (e *nilUnwrapper) Error() string { return "nil unwrapper" }
func (e *nilUnwrapper) Unwrap() error { return e.err }

// TestClassifyNeverPanics: no error value makes classification panic: not
// an error type promoting StreamID and Code through a nil pointer (the
// REFUSED_STREAM shape match used to step through it), not a typed nil, not
// a nil request.
func TestClassifyNeverPanics(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, site, nil)
	for _, err := range []error{
		embedsNilStream{msg: "x"},
		&embedsNilStream{msg: "x"},
		embedsNilCode{},
		fmt.Errorf("wrapped: %w", embedsNilStream{}),
		errors.Join(embedsNilCode{}, embedsNilStream{}),
		(*net.OpError)(nil),
		(*net.DNSError)(nil),
		(*url.Error)(nil),
		(*nilUnwrapper)(nil),
		&url.Error{Op: "Get", URL: site, Err: (*net.OpError)(nil)},
	} {
		assert.NotPanics(t, func() { httpretry.Classify(req, nil, err) }, "%T", err)
		assert.NotPanics(t, func() { httpretry.Classify(nil, nil, err) }, "%T", err)
		fake := httpretrytest.NewScript(httpretrytest.Fail(err))
		tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		assert.NotPanics(t, func() {
			if _, err := tr.RoundTrip(get(t, context.Background())); err == nil {
				t.Errorf("%T: no error", err)
			}
		}, "%T", err)
	}
}

// TestClassifyNilRequest: Classify handles a nil request.
func TestClassifyNilRequest(t *testing.T) {
	t.Parallel()
	assert.Equal(t, httpretry.ClassFatal, httpretry.Classify(nil, &http.Response{StatusCode: 409}, nil))
	assert.Equal(t, httpretry.ClassTransient, httpretry.Classify(nil, &http.Response{StatusCode: 503}, nil))
	assert.Equal(t, httpretry.ClassSuccess, httpretry.Classify(nil, &http.Response{StatusCode: 200}, nil))
	assert.Equal(t, httpretry.ClassFatal, httpretry.Classify(nil, nil, nil), "neither a response nor an error")
	assert.Equal(t, httpretry.ClassFatal, httpretry.Classify(&http.Request{}, &http.Response{StatusCode: 409}, nil), "nil header")
}

// TestUnknownErrorsAreFatal: an error httpretry does not recognise, such as
// a signer's or a token source's in a custom Base, fails the same way on
// every attempt, so it is not retried; typed network failures are.
func TestUnknownErrorsAreFatal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		err   error
		class httpretry.Class
	}{
		{"a signer's error", errors.New("signer: key expired"), httpretry.ClassFatal},
		{"wrapped in url.Error", &url.Error{Op: "Get", URL: site, Err: errors.New("token source: invalid_grant")}, httpretry.ClassFatal},
		{"mTLS: certificate required", &net.OpError{Op: "remote error", Err: tls.AlertError(116)}, httpretry.ClassFatal},
		{"TLS 1.2 handshake failure alert", &net.OpError{Op: "remote error", Err: tls.AlertError(40)}, httpretry.ClassFatal},
		{"an alert over QUIC", tls.AlertError(116), httpretry.ClassFatal},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, httpretry.ClassTransient},
		{"broken pipe", &url.Error{Op: "Post", URL: site, Err: syscall.EPIPE}, httpretry.ClassTransient},
		{"EOF", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.ErrUnexpectedEOF), httpretry.ClassTransient},
		{"a timeout", &url.Error{Op: "Get", URL: site, Err: timeoutErr{}}, httpretry.ClassTransient},
		{"GOAWAY", goAwayError{LastStreamID: 1, ErrCode: 0}, httpretry.ClassTransient},
		{"stream reset", xnetStreamError{StreamID: 3, Code: 0x2}, httpretry.ClassTransient},
		{"REFUSED_STREAM", xnetStreamError{StreamID: 3, Code: 0x7}, httpretry.ClassNotProcessed},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, httpretry.ClassNotProcessed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.class, httpretry.Classify(httptest.NewRequest(http.MethodGet, site, nil), nil, tc.err))
		})
	}
}

func TestRefusedStreamFromXNet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			err      error
			attempts int
		}{
			{xnetStreamError{StreamID: 3, Code: 0x7}, 4},          // REFUSED_STREAM: never processed
			{&xnetStreamError{StreamID: 3, Code: 0x7}, 4},         // as a pointer
			{errors.Join(errBoom, xnetStreamError{Code: 0x7}), 4}, // wrapped
			{xnetStreamError{StreamID: 3, Code: 0x2}, 1},          // INTERNAL_ERROR: may have been processed
		} {
			fake := httpretrytest.NewScript(httpretrytest.Fail(tc.err))
			tr := &httpretry.Transport{Base: fake, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, site, strings.NewReader("x"))
			_, err := tr.RoundTrip(req)
			require.Error(t, err)
			assert.Len(t, fake.Requests(), tc.attempts, "%v", tc.err)
		}
	})
}

func TestUnknownErrorsOnOtherSchemesAreFatal(t *testing.T) {
	t.Parallel()
	fake := httpretrytest.NewScript(httpretrytest.Fail(errors.New(`unsupported protocol scheme "ftp"`)))
	tr := &httpretry.Transport{Base: fake}
	req, _ := http.NewRequest(http.MethodGet, "ftp://files.example.com/x", nil)
	_, err := tr.RoundTrip(req)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, httpretry.StopFatal, re.Stop)
	assert.Len(t, fake.Requests(), 1)
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// goAwayError has the shape of golang.org/x/net/http2.GoAwayError.
type goAwayError struct {
	LastStreamID uint32
	ErrCode      uint32
	DebugData    string
}

func (goAwayError) Error() string { return "http2: server sent GOAWAY" }

// xnetStreamError has the shape of golang.org/x/net/http2.StreamError,
// which, unlike net/http's bundled copy, has no As method.
type xnetStreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e xnetStreamError) Error() string { return "stream error" }

// TestClientCertificateRejectedIsFatal: a server that demands a client
// certificate the client does not have rejects every handshake the same
// way: one attempt, over a real TLS socket.
func TestClientCertificateRejectedIsFatal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failures are the point
	srv.StartTLS()
	defer srv.Close()
	attempts := 0
	base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		attempts++
		return srv.Client().Transport.RoundTrip(req)
	})
	tr := &httpretry.Transport{Base: base, Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		// TLS 1.3 sends the alert after the handshake: the request may
		// fail on reading the response instead.
		resp.Body.Close()
	}
	require.Error(t, err)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, httpretry.StopFatal, re.Stop, "%v", err)
	assert.Equal(t, 1, attempts)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	assert.Equal(t, "remote error", op.Op, "crypto/tls reports the server's alert as a remote error")
}

// TestClassifyUnderSynctest keeps the rules above true through the whole
// Transport: an unknown error is sent once.
func TestUnknownErrorSentOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := httpretrytest.NewScript(httpretrytest.Fail(errors.New("signer: key expired")))
		_, err := (&httpretry.Transport{Base: fake}).RoundTrip(get(t, t.Context()))
		var re *httpretry.RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, httpretry.StopFatal, re.Stop)
		assert.Len(t, fake.Requests(), 1)
		assert.True(t, strings.HasPrefix(err.Error(), "httpretry: not retryable after 1 attempt: signer"), err.Error())
	})
}

// selfWrapping is an error whose Unwrap returns itself: errors.Is would
// follow it for ever.
type selfWrapping struct{}

func (e *selfWrapping) Error() string { return "loop" }
func (e *selfWrapping) Unwrap() error { return e }

// panickyIs is a value error whose Is method panics.
type panickyIs struct{ m map[string]int }

func (e panickyIs) Error() string        { return "panicky" }
func (e panickyIs) Is(target error) bool { e.m["x"]++; return false }

// TestMalformedErrorsFromBase: an error that wraps itself, or whose Is
// method panics, ends the call with a clear error: no hang, no panic.
func TestMalformedErrorsFromBase(t *testing.T) {
	t.Parallel()
	for _, bad := range []error{&selfWrapping{}, panickyIs{}, fmt.Errorf("wrapped: %w", panickyIs{})} {
		up := httpretrytest.NewScript(httpretrytest.Fail(bad))
		tr := &httpretry.Transport{Base: up, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0), Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 3},
		}}
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panicked: %v", r)
				}
			}()
			_, err := tr.RoundTrip(get(t, context.Background()))
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err, "%T", bad)
			assert.NotContains(t, err.Error(), "panicked", "%T", bad)
			assert.Contains(t, err.Error(), "malformed error", "%T", bad)
		case <-time.After(5 * time.Second):
			t.Fatalf("%T: RoundTrip did not return", bad)
		}
	}
}
