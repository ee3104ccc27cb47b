package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// verifier is the server side of the signing scheme. It rejects, with 401,
// a request whose signature does not match, whose timestamp is more than
// maxAge from its clock, or whose nonce it has already accepted (a replay);
// it passes the others to next. Nonces need keeping only for maxAge: an
// older request is stale anyway.
type verifier struct {
	key    []byte
	maxAge time.Duration
	now    func() time.Time
	next   http.Handler

	mu       sync.Mutex
	nonces   map[string]bool
	verdicts []verdict
}

// verdict is what the verifier decided about one request.
type verdict struct {
	Timestamp string
	Nonce     string
	Body      string
	Reject    string // why it was rejected; "" if accepted
	Status    int    // the status answered
}

func newVerifier(key []byte, maxAge time.Duration, now func() time.Time, next http.Handler) *verifier {
	return &verifier{key: key, maxAge: maxAge, now: now, next: next, nonces: map[string]bool{}}
}

func (v *verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
		return
	}
	ts, nonce := r.Header.Get(headerTimestamp), r.Header.Get(headerNonce)
	vd := verdict{Timestamp: ts, Nonce: nonce, Body: string(body), Reject: v.check(r, body)}
	if vd.Reject != "" {
		vd.Status = http.StatusUnauthorized
		v.record(vd)
		http.Error(w, vd.Reject, http.StatusUnauthorized)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	v.next.ServeHTTP(rec, r)
	vd.Status = rec.status
	v.record(vd)
}

// check returns why r must be rejected, or "".
func (v *verifier) check(r *http.Request, body []byte) string {
	ts, nonce, got := r.Header.Get(headerTimestamp), r.Header.Get(headerNonce), r.Header.Get(headerSignature)
	if ts == "" || nonce == "" || got == "" {
		return "missing signature"
	}
	sum := sha256.Sum256(body)
	want := sign(v.key, r.Method, r.URL.RequestURI(), ts, nonce, hex.EncodeToString(sum[:]))
	if !hmac.Equal([]byte(got), []byte(want)) {
		return "bad signature"
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "bad timestamp"
	}
	if age := v.now().Sub(time.UnixMilli(ms)); age > v.maxAge || age < -v.maxAge {
		return "stale timestamp"
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nonces[nonce] {
		return "replayed nonce"
	}
	v.nonces[nonce] = true
	return ""
}

func (v *verifier) record(vd verdict) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.verdicts = append(v.verdicts, vd)
}

// seen returns the verdicts so far, in order.
func (v *verifier) seen() []verdict {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]verdict(nil), v.verdicts...)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// flakyReports is the API behind the verifier: its first answer is 503
// with Retry-After, as a service that is briefly overloaded sends; then it
// accepts reports. onFailure, if set, runs before that first answer.
type flakyReports struct {
	retryAfter string
	onFailure  func()

	mu   sync.Mutex
	hits int
}

func (f *flakyReports) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hits++
	first := f.hits == 1
	f.mu.Unlock()
	if first {
		if f.onFailure != nil {
			f.onFailure()
		}
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, "report stored\n")
}
