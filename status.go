package httpretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"
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
// Exactly one of resp and err is non-nil.
//
// Responses: 408, 425, 429, 500, 502, 503 and 504 are transient; 409 is
// transient for a request carrying an idempotency key (the original is still
// in flight); every other status of 400 or more is fatal, 2xx and 3xx are a
// success.
//
// Errors: context.Canceled, TLS certificate errors, a TLS record error (the
// server does not speak TLS), DNS not-found and a circuit breaker's refusal
// ([ErrCircuitOpen], or gobreaker's from a layer below) are fatal. Dial
// errors, connection refused, temporary DNS failures and HTTP/2
// REFUSED_STREAM are not-processed: the request never reached the server.
// Every other error (resets, EOF before a response, timeouts, GOAWAY and
// other connection losses) is transient, except for a URL scheme other than
// http and https, where a Base of the caller's fails in ways these rules
// cannot know and an unrecognised error is fatal. A context.DeadlineExceeded here is
// an attempt timeout: the Transport stops on the caller's own context before
// classifying. Decisions use errors.Is and errors.As on typed errors, never
// the error text.
func Classify(req *http.Request, resp *http.Response, err error) Class {
	if err != nil {
		c := classifyError(err)
		if c == ClassTransient && req != nil && req.URL != nil && !isHTTP(req.URL.Scheme) {
			// A Base of the caller's that speaks another scheme fails in
			// ways these rules do not know: never guess that it is transient.
			return ClassFatal
		}
		return c
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ClassTransient
	case http.StatusConflict:
		if hasKey(req.Header) {
			return ClassTransient
		}
	}
	if resp.StatusCode >= 400 {
		return ClassFatal
	}
	return ClassSuccess
}

// refusedStream reports whether err wraps an HTTP/2 stream error with code
// REFUSED_STREAM: net/http's bundled one or golang.org/x/net/http2's, both
// unexported or out of reach of this module. It matches their shape, a
// struct with fields StreamID and Code of kind uint32, so that no x/net
// dependency is needed.
func refusedStream(err error) bool {
	for _, e := range errorTree(err) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			continue
		}
		id, code := v.FieldByName("StreamID"), v.FieldByName("Code")
		if id.IsValid() && code.IsValid() && id.Kind() == reflect.Uint32 && code.Kind() == reflect.Uint32 &&
			code.Uint() == h2RefusedStream {
			return true
		}
	}
	return false
}

// errorTree lists err and everything it wraps, depth first.
func errorTree(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(out) > 64 {
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

func isHTTP(scheme string) bool {
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
}

const h2RefusedStream = 0x7

func classifyError(err error) Class {
	// The transport stops on the caller's own context before classifying, so
	// a deadline seen here is an attempt timeout, which is worth retrying.
	if errors.Is(err, context.Canceled) || isBreakerOpen(err) {
		return ClassFatal
	}
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		dnsErr      *net.DNSError
		opErr       *net.OpError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalidErr), errors.As(err, &recordErr):
		return ClassFatal
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return ClassFatal
		}
		return ClassNotProcessed // no address, so nothing was sent
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassNotProcessed
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return ClassNotProcessed
	case refusedStream(err):
		return ClassNotProcessed
	}
	return ClassTransient
}

// maxRetryAfterSeconds bounds delay-seconds before conversion so that
// n·time.Second cannot overflow; anything larger is ignored as hostile.
const maxRetryAfterSeconds = 1 << 32

// ParseRetryAfter parses a Retry-After header value (RFC 9110 § 10.2.3):
// delay-seconds, or an HTTP-date in any of the three forms http.ParseTime
// accepts. A date in the past means 0. It reports false for a missing,
// negative, fractional, overflowing or otherwise malformed value, which
// callers should ignore.
//
// [RFC 9110 § 10.2.3]: https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' {
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil || n > maxRetryAfterSeconds {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// retryAfter reads the response's Retry-After. Several headers, or a
// comma-joined value, are malformed and ignored.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	vs := resp.Header.Values("Retry-After")
	if len(vs) != 1 {
		return 0, false
	}
	return ParseRetryAfter(vs[0], now)
}
