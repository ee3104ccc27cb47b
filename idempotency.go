package httpretry

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// replayableMethod reports whether RFC 9110 makes the method idempotent, so
// sending it twice has the effect of sending it once (§ 9.2.2).
func replayableMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// hasKey reports whether h carries an idempotency key under either of the
// names net/http itself recognises, in any case.
func hasKey(h http.Header) bool {
	return hasHeader(h, "Idempotency-Key") || hasHeader(h, "X-Idempotency-Key")
}

// keyed reports whether req carries an idempotency key, under the policy's
// header or either standard name, in any case.
func (p *policy) keyed(req *http.Request) bool {
	return hasKey(req.Header) || hasHeader(req.Header, p.keyHeader)
}

// hasHeader reports whether h has the header canonical (a canonical name),
// under that name or under any spelling of it: a caller may set
// h["idempotency-key"] directly, and net/http sends it as it is. Header
// names are matched this way everywhere the Transport reads a caller's.
func hasHeader(h http.Header, canonical string) bool {
	if h[canonical] != nil {
		return true
	}
	for name := range h {
		if len(name) == len(canonical) && strings.EqualFold(name, canonical) {
			return true
		}
	}
	return false
}

// setHeader sets the header canonical (a canonical name) of h, an attempt
// request's own header, to v, removing any other spelling of it.
func setHeader(h http.Header, canonical, v string) {
	for name := range h {
		if name != canonical && len(name) == len(canonical) && strings.EqualFold(name, canonical) {
			delete(h, name)
		}
	}
	h[canonical] = []string{v}
}

// replayable is the rule for sending a request more than once when the
// server may have processed it: an idempotent method, or a key that lets the
// server recognise the repeat.
func (p *policy) replayable(req *http.Request) bool {
	return replayableMethod(req.Method) || p.keyed(req)
}

// needsKey reports whether a key should be added to req.
func (p *policy) needsKey(req *http.Request) bool {
	return !p.keysOff && slices.Contains(p.keyMethods, req.Method) && !p.keyed(req)
}

// key returns a fresh key, quoted as a structured-field string if asked.
func (p *policy) key() (string, error) {
	k := p.newKey()
	if k == "" {
		return "", fmt.Errorf("%w: Keys.New returned an empty key", ErrInvalidPolicy)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < ' ' || c >= 0x7f {
			return "", fmt.Errorf("%w: Keys.New returned a key with a control or non-ASCII character", ErrInvalidPolicy)
		}
	}
	if !p.quoted {
		return k, nil
	}
	var b strings.Builder
	b.Grow(len(k) + 2)
	b.WriteByte('"')
	for i := 0; i < len(k); i++ {
		if k[i] == '"' || k[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(k[i])
	}
	b.WriteByte('"')
	return b.String(), nil
}

// newUUID returns a random (version 4) UUID, as uuid.NewString does, in
// one allocation, its string, where uuid.NewString takes two: the 16
// bytes come from crypto/rand into an array that does not escape.
func newUUID() string {
	var u uuid.UUID
	rand.Read(u[:])         // never fails (crypto/rand, Go 1.24)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 9562
	return u.String()
}
