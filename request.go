package httpretry

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// checkRequest rejects what no attempt could send, so that the failure is a
// clear ErrInvalidRequest rather than a retried transport error. The scheme
// is checked only when the Transport owns its Base, since a custom Base may
// speak others.
func checkRequest(req *http.Request, ownBase bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	switch {
	case req == nil:
		return bad("nil request")
	case req.URL == nil:
		return bad("nil URL")
	case req.Header == nil:
		return bad("nil Header")
	case req.URL.Host == "":
		return bad("no host in URL")
	case ownBase && !isHTTP(req.URL.Scheme):
		return bad("unsupported scheme %q", req.URL.Scheme)
	case req.Method != "" && !validToken(req.Method):
		return bad("invalid method %q", req.Method)
	case (req.Body == nil || req.Body == http.NoBody) && req.ContentLength > 0:
		return bad("ContentLength is %d but there is no body", req.ContentLength)
	}
	for name, values := range req.Header {
		if !validToken(name) {
			return bad("invalid header name %q", name)
		}
		for _, v := range values {
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return bad("invalid value for header %q", name)
			}
		}
	}
	return nil
}

func isHTTP(scheme string) bool {
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
}

// validToken reports whether s is an RFC 9110 token, the syntax of header
// names and methods.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// closeBody closes rc if there is one. It is the one way this package
// closes request and response bodies.
func closeBody(rc io.ReadCloser) {
	if rc != nil {
		rc.Close()
	}
}
