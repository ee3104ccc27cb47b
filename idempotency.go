package httpretry

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// KeyPolicy configures idempotency keys. A key is generated once per
// RoundTrip and sent, unchanged, on every attempt and hedge; a key the
// caller set is never replaced. In Hosts and WithPolicy, a zero KeyPolicy
// inherits and a non-zero one replaces the inherited one as a whole.
type KeyPolicy struct {
	// Disabled turns key injection off. Requests that carry a key of their
	// own are still treated as replayable.
	Disabled bool

	// Methods lists the methods that get a key. Nil means POST and PUT.
	Methods []string

	// Header names the header. "" means Idempotency-Key. Requests carrying
	// this header, Idempotency-Key or X-Idempotency-Key count as keyed,
	// everywhere: for replay, hedging, and a 409 being transient.
	Header string

	// New returns a fresh key. Nil means a random UUIDv4. It is called from
	// many goroutines at once. An empty key, or one with control
	// characters, fails the request with ErrInvalidPolicy.
	New func() string

	// Quoted sends the key as a structured-field string ("…"), as the IETF
	// draft specifies, instead of the bare token most APIs expect.
	Quoted bool
}

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
// names net/http itself recognises.
func hasKey(h http.Header) bool {
	return h["Idempotency-Key"] != nil || h["X-Idempotency-Key"] != nil
}

// keyed reports whether req carries an idempotency key, under the policy's
// header or either standard name.
func (p *policy) keyed(req *http.Request) bool {
	return hasKey(req.Header) || req.Header[p.keyHeader] != nil
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

func newUUID() string { return uuid.NewString() }
