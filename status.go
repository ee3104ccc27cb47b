package httpretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seedhq/httpretry/internal/breaker"
	"github.com/seedhq/httpretry/internal/headers"
	"github.com/seedhq/httpretry/internal/signal"
	"github.com/sony/gobreaker/v2"
)

// Class is the verdict on one attempt's outcome.
type Class int

const (
	// ClassDefault, returned by a Policy.Classify function, defers to the
	// built-in classification.
	ClassDefault Class = iota
	// ClassSuccess: return the response to the caller.
	ClassSuccess
	// ClassFatal: retrying cannot help; return the response or error as is.
	ClassFatal
	// ClassTransient: the failure may pass, but the server may have
	// processed the request; retried only when the request is replayable.
	ClassTransient
	// ClassNotProcessed: the failure may pass and the server provably never
	// processed the request (it was never sent, or the server refused the
	// stream), so it is retried whatever the method.
	ClassNotProcessed
)

var classNames = [...]string{"default", "success", "fatal", "transient", "not-processed"}

// String returns the class's name as used in logs.
func (c Class) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

func (c Class) retryable() bool { return c == ClassTransient || c == ClassNotProcessed }

// Classify is the built-in classification of one attempt's outcome, the one
// a Policy.Classify function falls back to when it returns ClassDefault.
// Exactly one of resp and err should be non-nil; req may be nil.
//
// Responses: 408, 425, 429, 500, 502, 503 and 504 are transient; 409 is
// transient for a request carrying an idempotency key that may have been
// sent before (the original is still in flight): the caller set the key,
// or an earlier attempt of the same call carried it — a 409 to the first
// attempt with a key the Transport added means a real conflict, such as
// "already exists"; every other status of 400 or more is fatal, 2xx and
// 3xx are a success. 1xx responses that reach a RoundTripper (101
// Switching Protocols) are a success.
//
// Errors. Not processed (the request never reached the server): dial
// errors, connection refused, temporary DNS failures, HTTP/2
// REFUSED_STREAM; but inside a *url.Error, which an http.Client in Base
// returns for the last request it made, only when it names the request's
// own URL and the attempt wrote nothing (or the stream was refused): a
// redirect's follow-up that cannot dial comes after the server processed
// the first request. Otherwise, and for a request that is not a
// Transport's attempt, such an error is transient. Transient: network errors from a read or write
// (*net.OpError), timeouts (a net.Error whose Timeout reports true, or
// context.DeadlineExceeded, which here is an attempt timeout), connection
// resets and aborts, broken pipes, unreachable hosts and networks, EOF
// before a response, and HTTP/2 GOAWAY, stream and connection errors.
// Fatal: context.Canceled, TLS certificate errors, an alert from the server
// during the handshake (it requires a client certificate, or will not
// speak the protocol version), a server that does not speak TLS, DNS
// not-found, and a circuit breaker's refusal ([ErrCircuitOpen], or
// gobreaker's from a layer below).
//
// An error of a type these rules do not know is judged by how far
// net/http took the attempt, as the httptrace.ClientTrace hooks that a
// Transport composes with any trace of the caller's report it: not
// processed when a connection was got but nothing was written on it (an
// HTTP/2 connection found unusable); transient when the request was
// written (a connection closed under the request, an answer that broke
// off or does not parse); fatal when it never reached a connection (a
// layer of the caller's in Base that fails before net/http, a request
// signer or a token source, would fail the same way on every attempt, and
// says nothing about the host), and when an http.Client in Base reports
// it in a *url.Error: its own policy (a redirect refused by CheckRedirect,
// too many redirects) fails that way after answers, and cannot be told
// from a failure of its connections. Only an attempt of a Transport, with
// an http or https URL,
// has that record; for any other request such an error is fatal. A
// Policy.Classify function can decide otherwise. An error the request body
// itself gave while it was sent (ErrRequestBody) is fatal. An error
// reading a response body the Transport read ahead (Policy.ReadBodyBytes)
// is never not processed, since the server answered: it is fatal when the
// error is, else transient.
// Decisions use errors.Is, errors.As and the types of errors, never the
// error text. Classify never panics, whatever the error value.
func Classify(req *http.Request, resp *http.Response, err error) Class {
	return classify(req, resp, err, nil)
}

// classify is Classify with the policy whose key header also marks a
// request as keyed; p may be nil.
func classify(req *http.Request, resp *http.Response, err error, p *policy) Class {
	switch {
	case err != nil:
		c := classifyError(err)
		var ue *url.Error
		if c == ClassNotProcessed && errors.As(err, &ue) && ue != nil && !firstRequestOf(req, ue) {
			// An http.Client in Base reports in a *url.Error the failure of
			// the last request it made: a redirect's follow-up, whose dial
			// error says nothing about the first request, which the server
			// may have processed.
			c = ClassTransient
		}
		if c == classUnknown {
			c = ClassFatal
			if req != nil && req.URL != nil && isHTTP(req.URL.Scheme) && !errors.As(err, &ue) {
				switch progressOf(req) {
				case progressConn:
					c = ClassNotProcessed // got a connection, wrote nothing on it
				case progressWritten:
					c = ClassTransient // net/http reports some failures of a connection without a type
				}
			}
		}
		return c
	case resp == nil:
		return ClassFatal
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ClassTransient
	case http.StatusConflict:
		if req != nil && req.Header != nil && (hasKey(req.Header) || (p != nil && p.keyed(req))) {
			if keySentBefore(req) {
				return ClassTransient
			}
		}
	}
	if resp.StatusCode >= 400 {
		return ClassFatal
	}
	return ClassSuccess
}

func classifyError(err error) (c Class) {
	defer func() {
		// An error type whose methods panic on its own value (a nil pointer
		// with an Is or Unwrap method that dereferences it) is not a
		// failure that retrying can fix.
		if recover() != nil {
			c = ClassFatal
		}
	}()
	var bodyErr *responseBodyError
	if errors.As(err, &bodyErr) {
		// The server answered: whatever broke the body, the request was
		// processed, and a failure of the connection is transient.
		if classifyError(bodyErr.err) == ClassFatal {
			return ClassFatal
		}
		return ClassTransient
	}
	// The Transport stops on the caller's own context before classifying, so
	// a deadline seen here is an attempt timeout, which is worth retrying.
	if errors.Is(err, context.Canceled) || isBreakerOpen(err) || errors.Is(err, ErrRequestBody) {
		return ClassFatal
	}
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		echErr      *tls.ECHRejectionError
		dnsErr      *net.DNSError
		opErr       *net.OpError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr),
		errors.As(err, &invalidErr), errors.As(err, &recordErr), errors.As(err, &alertErr),
		errors.As(err, &echErr):
		return ClassFatal
	case errors.As(err, &opErr) && opErr != nil && opErr.Op == "remote error":
		// crypto/tls reports an alert from the peer this way: the server
		// refused the handshake (a client certificate it requires, a
		// protocol version it will not speak). It will refuse again.
		return ClassFatal
	case errors.As(err, &dnsErr) && dnsErr != nil:
		if dnsErr.IsNotFound {
			return ClassFatal
		}
		return ClassNotProcessed // no address, so nothing was sent
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassNotProcessed
	case errors.As(err, &opErr) && opErr != nil && opErr.Op == "dial":
		return ClassNotProcessed
	case h2Error(err, h2RefusedStream):
		return ClassNotProcessed
	case errors.Is(err, context.DeadlineExceeded), transientError(err):
		return ClassTransient
	}
	return classUnknown
}

// firstRequestOf reports whether ue, a *url.Error in the error of attempt
// req, may be about req itself rather than about a redirect's follow-up: an
// http.Client names in it the URL of the request that failed (password
// redacted), which for a follow-up is the redirect's target. For a request
// that is not an attempt of a Transport (no URL, or no record of its
// progress) it cannot tell: false. A follow-up to the very URL (a redirect
// loop) is told apart by the httptrace record: the first request was
// written; without a record (no hook fired) it cannot be, and false is the
// safe answer. TestRedirectThenDialErrorIsNotResentUnkeyed and
// TestDialErrorOfAURLWithAPasswordIsNotProcessed fail if http.Client names
// the URL otherwise.
func firstRequestOf(req *http.Request, ue *url.Error) bool {
	if req == nil || req.URL == nil || ue.URL != clientURL(req.URL) {
		return false
	}
	switch progressOf(req) {
	case progressConn:
		return true // net/http asked for a connection and wrote nothing: no request went out
	case progressWritten:
		return h2Error(ue, h2RefusedStream) // the server refused the stream: it processed nothing
	}
	// No hook fired (a client transport that is not net/http's): a
	// redirect to the very URL cannot be told from the request.
	return false
}

// clientURL is u as an http.Client names it in its *url.Error: with a
// password, "***" stands for it (net/http's stripPassword), where
// URL.Redacted writes "xxxxx".
func clientURL(u *url.URL) string {
	if _, has := u.User.Password(); !has {
		return u.String()
	}
	return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
}

// classUnknown is the class of an error these rules do not recognise.
const classUnknown Class = -1

// transientErrnos are the system errors of a connection that failed in a way
// that may pass.
var transientErrnos = [...]syscall.Errno{
	syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ETIMEDOUT,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, syscall.ENETRESET,
}

// transientError reports whether err is a failure of the connection that
// may pass: a network operation's error, a timeout, a reset, EOF before a
// response, an HTTP/2 connection or stream error.
func transientError(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	for _, errno := range transientErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	for _, e := range errorTree(err) {
		switch e := e.(type) {
		case *url.Error:
			continue // a wrapper: its Timeout reports the wrapped error's
		case *net.OpError:
			if e != nil {
				return true
			}
		case net.Error:
			if timeout(e) {
				return true
			}
		}
	}
	return h2Error(err, h2Any)
}

// timeout calls e.Timeout, treating a panic (a nil pointer of a type whose
// method does not expect one) as false.
func timeout(e net.Error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return e.Timeout()
}

// h2Error reports whether err wraps an HTTP/2 error: with code >= 0, a
// stream error with that code; with h2Any, any stream, GOAWAY or
// connection error; with h2AnyStream, any stream error (a stream reset,
// on a connection that lives on). net/http's bundled HTTP/2 types are
// unexported and golang.org/x/net/http2's are out of reach of this module,
// so they are recognised by their shape: a stream error is a struct with
// fields StreamID and Code of kind uint32, a GOAWAY a struct with
// LastStreamID and ErrCode, a connection error a uint32 type named
// ConnectionError in either package.
// This is the one place the Transport relies on another package's
// unexported types; the shapes are those of go1.26's net/http
// (h2_bundle.go: http2StreamError, http2GoAwayError, http2ConnectionError),
// and TestH2ErrorShapeOfThisGo fails when the stream error's changes; e2e's
// TestH2RefusedStream and TestH2GoawayUnderLoad check them end to end.
func h2Error(err error, code int64) bool {
	for _, e := range errorTree(err) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				continue
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Struct:
			if c, ok := uint32Field(v, "StreamID", "Code"); ok && (code < 0 || int64(c) == code) {
				return true
			}
			if _, ok := uint32Field(v, "LastStreamID", "ErrCode"); ok && code == h2Any {
				return true
			}
		case reflect.Uint32:
			t := v.Type()
			if code == h2Any && (t.PkgPath() == "net/http" && t.Name() == "http2ConnectionError" ||
				t.PkgPath() == "golang.org/x/net/http2" && t.Name() == "ConnectionError") {
				return true
			}
		}
	}
	return false
}

// uint32Field returns the value of field code of struct v when v also has
// field id and both are of kind uint32. Fields promoted through a nil
// embedded pointer are treated as absent.
func uint32Field(v reflect.Value, id, code string) (uint64, bool) {
	t := v.Type()
	idf, ok1 := t.FieldByName(id)
	cf, ok2 := t.FieldByName(code)
	if !ok1 || !ok2 || idf.Type.Kind() != reflect.Uint32 || cf.Type.Kind() != reflect.Uint32 {
		return 0, false
	}
	if _, err := v.FieldByIndexErr(idf.Index); err != nil {
		return 0, false
	}
	c, err := v.FieldByIndexErr(cf.Index)
	if err != nil {
		return 0, false
	}
	return c.Uint(), true
}

// errorTree lists err and everything it wraps, depth first, at most 64
// errors, so that an error that wraps itself cannot loop.
func errorTree(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(out) >= maxErrorTree {
			return
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

const (
	h2RefusedStream = 0x7
	h2Any           = -1 // h2Error: any HTTP/2 error
	h2AnyStream     = -2 // h2Error: any stream error
)

// checkError returns err, or, when err or an error it wraps is a nil
// pointer or has methods that panic, an error saying so: such a value
// would make errors.Is, errors.As and Error panic later, in the
// Transport's hands or the caller's.
func checkError(err error) error {
	if err == nil || wellFormed(err) {
		return err
	}
	return fmt.Errorf("httpretry: Base returned a malformed error of type %T (a nil pointer, or methods that panic)", err)
}

func wellFormed(err error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	seen := 0
	var walk func(error) bool
	walk = func(e error) bool {
		if e == nil {
			return true
		}
		if seen++; seen > maxErrorTree {
			return false // a chain this deep is a loop: errors.Is would never end
		}
		if v := reflect.ValueOf(e); v.Kind() == reflect.Pointer && v.IsNil() {
			return false
		}
		_ = e.Error()
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				if !walk(x) {
					return false
				}
			}
		}
		return true
	}
	if !walk(err) {
		return false
	}
	// Every Is and As method in the tree runs here once, under recover:
	// the Transport and its caller call errors.Is on it later.
	_ = errors.Is(err, ErrCircuitOpen)
	var target *net.OpError
	_ = errors.As(err, &target)
	return true
}

// maxErrorTree bounds how many errors one error may wrap.
const maxErrorTree = 64

// shouldRetry reads the should-retry header of a failure (a status of 400
// or more): ClassNotProcessed for "true", ClassFatal for "false",
// ClassDefault otherwise. On a success it says nothing: a request the
// server carried out is never sent again on its word.
func (h *HintPolicy) shouldRetry(resp *http.Response) Class {
	if h.ShouldRetryHeader == "" || resp == nil || resp.StatusCode < 400 {
		return ClassDefault
	}
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get(h.ShouldRetryHeader))) {
	case "true":
		return ClassNotProcessed
	case "false":
		return ClassFatal
	}
	return ClassDefault
}

// ParseRetryAfter parses a Retry-After header value (RFC 9110 § 10.2.3):
// delay-seconds, or an HTTP-date in any of the three forms http.ParseTime
// accepts. A date in the past means 0. It reports false for a missing,
// negative, fractional, overflowing or otherwise malformed value, which
// callers should ignore.
//
// [RFC 9110 § 10.2.3]: https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	return headers.ParseRetryAfter(value, now)
}

// breakerOutcome maps a classified attempt to what the breaker counts:
// only what says something about the host. Transient and not-processed
// failures, and fatal errors of a known type without a response (a
// certificate the host should not present), are failures; any response the
// server meant to send, 4xx included, is a success; the caller's own
// cancellation, a lost hedge, a breaker refusal further down, an error the
// request body gave, and a fatal error of a type the rules do not know
// (a layer of the caller's in Base that failed before the connection, an
// http.Client in Base refusing a redirect) are not counted.
func breakerOutcome(ctx context.Context, a *Attempt) breaker.Outcome {
	switch {
	case ctx.Err() != nil || a.Lost || isBreakerOpen(a.Err):
		return breaker.Excluded
	case a.Class.retryable():
		return breaker.Failure
	case a.Err != nil && a.Class == ClassFatal:
		if errors.Is(a.Err, ErrRequestBody) || classifyError(a.Err) == classUnknown {
			return breaker.Excluded
		}
		return breaker.Failure
	}
	return breaker.Success
}

// isBreakerOpen reports whether err is a refusal by a circuit breaker: ours,
// or a gobreaker used by a layer under the Transport.
func isBreakerOpen(err error) bool {
	return errors.Is(err, ErrCircuitOpen) || errors.Is(err, gobreaker.ErrOpenState) ||
		errors.Is(err, gobreaker.ErrTooManyRequests)
}

// loadSignal says what an attempt's outcome tells about its host's load.
// ctx is the caller's context: an attempt it cancelled says nothing, one
// cut short by its deadline was too slow for its caller. Exactly one of
// resp and err should be non-nil; a hedge that lost to another is the
// caller's business and should not be given here.
//
// The line is drawn where the SRE book draws it: an accept is a request
// the backend accepted. Explicit refusals (429 and 503, RFC 9110 § 15.6.4's
// "temporary overload"), a gateway that gave up on the host (502, 504) and
// silence until a timeout (the overload symptom of Bronson et al.'s
// metastable retry loop) count against the host; an answer the host meant
// to give counts for it, even an error. What no server took part in
// (refused connections, DNS) is left to the circuit breaker.
func loadSignal(ctx context.Context, resp *http.Response, err error) signal.Signal {
	if err == nil {
		if resp == nil {
			return signal.None
		}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return signal.Overloaded
		}
		return signal.Accepted
	}
	if refusedLocally(err) {
		return signal.None
	}
	if ctx != nil {
		switch ctx.Err() {
		case context.Canceled:
			return signal.None
		case context.DeadlineExceeded:
			return signal.Overloaded
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, ErrAttemptTimeout), errors.As(err, &ne) && ne.Timeout():
		return signal.Overloaded // dial timeouts included: a full accept queue drops SYNs
	case h2Error(err, h2RefusedStream):
		return signal.Overloaded
	case classifyError(err) == ClassTransient:
		return signal.Overloaded // resets, EOF before the response, GOAWAY
	}
	return signal.None // not processed, fatal, or an error these rules do not know
}

// refusedLocally reports whether err is a refusal by one of the Transport's
// own controls, which must never be mistaken for the host's answer.
func refusedLocally(err error) bool {
	return errors.Is(err, ErrThrottled) || errors.Is(err, ErrConcurrencyLimit) ||
		errors.Is(err, ErrRateLimited) || isBreakerOpen(err)
}
