package httpretry

import (
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
// names net/http itself recognises.
func hasKey(h http.Header) bool {
	return h["Idempotency-Key"] != nil || h["X-Idempotency-Key"] != nil
}

// replayable is the rule for sending a request more than once when the
// server may have processed it: an idempotent method, or a key that lets the
// server recognise the repeat.
func (p *policy) replayable(req *http.Request) bool {
	return replayableMethod(req.Method) || hasKey(req.Header) || req.Header[p.keyHeader] != nil
}

// needsKey reports whether a key should be added to req.
func (p *policy) needsKey(req *http.Request) bool {
	return !p.keysOff && slices.Contains(p.keyMethods, req.Method) &&
		!hasKey(req.Header) && req.Header[p.keyHeader] == nil
}

// key returns a fresh key, quoted as a structured-field string if asked.
// It reports false when the generator returned something that cannot be
// sent in a header.
func (p *policy) key() (string, bool) {
	k := p.newKey()
	if k == "" {
		return "", false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < ' ' || c >= 0x7f {
			return "", false
		}
	}
	if !p.quoted {
		return k, true
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
	return b.String(), true
}

func newUUID() string { return uuid.NewString() }
