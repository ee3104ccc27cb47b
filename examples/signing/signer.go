package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Headers of the signing scheme: a timestamp, a one-time nonce, and an
// HMAC-SHA256 over both, the method, the path and the body.
const (
	headerTimestamp = "X-Signature-Timestamp" // Unix milliseconds
	headerNonce     = "X-Signature-Nonce"
	headerSignature = "X-Signature"
)

// errNoGetBody is returned for a request with a body but no GetBody: the
// signer would have to consume the body to hash it. httpretry.Transport sets
// GetBody on every attempt, except for a body above Policy.MaxReplayBytes,
// which it streams once.
var errNoGetBody = errors.New("signer: request has a body but no GetBody, so the body cannot be hashed without consuming it")

// Signer is an http.RoundTripper that signs each request as it sends it.
// Put it under httpretry.Transport, as its Base, so that every attempt gets
// its own timestamp and nonce; above the Transport, one signature would be
// sent on every attempt, and a retry after a wait would carry a stale one.
type Signer struct {
	Key  []byte            // the shared HMAC key
	Base http.RoundTripper // sends the signed request; nil means http.DefaultTransport
	Now  func() time.Time  // nil means time.Now; the demo's tests pass a fake clock
}

// RoundTrip signs a copy of req and sends it. It reads the body through
// req.GetBody, so req.Body is left for Base to send.
func (s *Signer) RoundTrip(req *http.Request) (*http.Response, error) {
	bodySum, err := hashBody(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ts := strconv.FormatInt(now().UnixMilli(), 10)
	nonce := rand.Text()

	signed := req.Clone(req.Context()) // never modify the caller's request
	signed.Header.Set(headerTimestamp, ts)
	signed.Header.Set(headerNonce, nonce)
	signed.Header.Set(headerSignature, sign(s.Key, req.Method, req.URL.RequestURI(), ts, nonce, bodySum))

	base := s.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(signed)
}

// hashBody returns the hex SHA-256 of req's body, read from a fresh copy.
func hashBody(req *http.Request) (string, error) {
	h := sha256.New()
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return "", errNoGetBody
		}
		rc, err := req.GetBody()
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sign returns the hex HMAC-SHA256 of the signed fields, one per line.
func sign(key []byte, method, uri, ts, nonce, bodySum string) string {
	m := hmac.New(sha256.New, key)
	for _, field := range []string{method, uri, ts, nonce, bodySum} {
		io.WriteString(m, field)
		io.WriteString(m, "\n")
	}
	return hex.EncodeToString(m.Sum(nil))
}
