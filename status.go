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
	"syscall"
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
// transient for a request carrying an idempotency key (the original is still
// in flight); every other status of 400 or more is fatal, 2xx and 3xx are a
// success. 1xx responses that reach a RoundTripper (101 Switching
// Protocols) are a success.
//
// Errors. Not processed (the request never reached the server): dial
// errors, connection refused, temporary DNS failures, HTTP/2
// REFUSED_STREAM. Transient: network errors from a read or write
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
// An error of a type these rules do not know is transient when the
// attempt had reached net/http's client (which reports some failures of a
// connection without a type, such as an HTTP/2 connection closed under the
// request), and fatal otherwise: a layer of the caller's in Base that
// fails before it, a request signer or a token source, would fail the same
// way on every attempt, and its errors say nothing about the host. Only an
// attempt of a Transport, with an http or https URL, counts as having
// reached net/http; for any other request such an error is fatal. A Policy.Classify function can decide otherwise.
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
		if c == classUnknown {
			// net/http reports some failures of a connection without a
			// type (an HTTP/2 connection closed under the request); a
			// layer of the caller's above it fails in ways that repeat.
			c = ClassFatal
			if reachedHTTP(req) && isHTTP(req.URL.Scheme) {
				c = ClassTransient
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
			return ClassTransient
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
	// The Transport stops on the caller's own context before classifying, so
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
	return h2Error(err, -1)
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
// stream error with that code; with code -1, any stream, GOAWAY or
// connection error. net/http's bundled HTTP/2 types are unexported and
// golang.org/x/net/http2's are out of reach of this module, so they are
// recognised by their shape: a stream error is a struct with fields StreamID
// and Code of kind uint32, a GOAWAY a struct with LastStreamID and ErrCode,
// a connection error a uint32 type named ConnectionError in either package.
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
			if _, ok := uint32Field(v, "LastStreamID", "ErrCode"); ok && code < 0 {
				return true
			}
		case reflect.Uint32:
			t := v.Type()
			if code < 0 && (t.PkgPath() == "net/http" && t.Name() == "http2ConnectionError" ||
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

const h2RefusedStream = 0x7

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
