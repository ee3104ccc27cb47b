package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ledger is a payment-like upstream.
//
// A POST with an Idempotency-Key applies a payment once per key: a repeat
// of the key with the same payload gets the stored answer
// (Idempotent-Replayed: true), with another payload a 422, as Stripe does.
// A POST without a key is applied every time it arrives: its X-Request-Id,
// the same on every attempt, lets the test see one applied twice. GET
// answers "ok". A request whose body cannot be read in full is not applied.
type ledger struct {
	delay atomic.Int64 // nanoseconds to wait after applying, before answering

	arrivals atomic.Int64 // requests whose headers arrived
	applied  atomic.Int64 // payments applied, keyed or not

	mu     sync.Mutex
	byKey  map[string]*payment // keyed POSTs, by Idempotency-Key
	byID   map[string]int      // unkeyed POSTs, by X-Request-Id: times applied
	misuse int                 // a key reused with another payload
}

type payment struct {
	payload    string
	deliveries int // times the key arrived
	applied    int // times it was applied: never more than 1
}

func newLedger() *ledger {
	return &ledger{byKey: map[string]*payment{}, byID: map[string]int{}}
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.arrivals.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "incomplete body", http.StatusBadRequest)
		return
	}
	status, replayed := http.StatusOK, false
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			l.mu.Lock()
			l.byID[r.Header.Get("X-Request-Id")]++
			l.mu.Unlock()
			l.applied.Add(1)
			break
		}
		l.mu.Lock()
		p := l.byKey[key]
		switch {
		case p == nil:
			l.byKey[key] = &payment{payload: string(body), deliveries: 1, applied: 1}
			l.applied.Add(1)
		case p.payload != string(body):
			l.misuse++
			status = http.StatusUnprocessableEntity
		default:
			p.deliveries++
			replayed = true
		}
		l.mu.Unlock()
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if d := time.Duration(l.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
	io.WriteString(w, "ok\n")
}

// ledgerStats is a snapshot of what the ledger did.
type ledgerStats struct {
	keys, ids         int // distinct keys, and ids of unkeyed POSTs, seen
	deliveries        int // keyed POST arrivals, repeats included
	maxKey, maxID     int // most applications of one key, of one unkeyed POST
	misuse            int
	arrivals, applied int64
}

func (l *ledger) stats() ledgerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ledgerStats{keys: len(l.byKey), ids: len(l.byID), misuse: l.misuse,
		arrivals: l.arrivals.Load(), applied: l.applied.Load()}
	for _, p := range l.byKey {
		s.deliveries += p.deliveries
		s.maxKey = max(s.maxKey, p.applied)
	}
	for _, n := range l.byID {
		s.maxID = max(s.maxID, n)
	}
	return s
}

// appliedKey and appliedID report how often one payment was applied.
func (l *ledger) appliedKey(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.byKey[key]; p != nil {
		return p.applied
	}
	return 0
}

func (l *ledger) appliedID(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byID[id]
}

// closeCounter records that a request body was closed.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// result is the outcome of one logical request.
type result struct {
	status int // 0 when err is set
	header http.Header
	body   string // the response body, read in full
	err    error  // RoundTrip's error, or the body's read error
}

// send makes one logical request through rt and checks the RoundTripper
// contract on the way: exactly one of response and error, and the request
// body closed. The response body is read in full and closed.
//
// The contract lets a RoundTripper close the request body "in a separate
// goroutine even after RoundTrip returns", and net/http's does (its write
// loop closes it once written), so the close is awaited, for a while.
func send(ctx context.Context, rt http.RoundTripper, method, url, payload string, header http.Header) (result, error) {
	var body io.ReadCloser
	var cc *closeCounter
	if payload != "" {
		cc = &closeCounter{Reader: strings.NewReader(payload)}
		body = cc
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return result{}, err
	}
	if payload != "" {
		req.ContentLength = int64(len(payload))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := rt.RoundTrip(req)
	switch {
	case resp != nil && err != nil:
		resp.Body.Close()
		return result{}, fmt.Errorf("contract: both a response and an error (%v)", err)
	case resp == nil && err == nil:
		return result{}, errors.New("contract: neither a response nor an error")
	case cc != nil && !eventually(func() bool { return cc.closed.Load() > 0 }):
		if resp != nil {
			resp.Body.Close()
		}
		return result{}, errors.New("contract: request body not closed")
	case err != nil:
		return result{err: err}, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}, nil
}

// mustSend is send for tests that expect no contract violation.
func mustSend(t testing.TB, rt http.RoundTripper, method, url, payload string, header http.Header) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r, err := send(ctx, rt, method, url, payload, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eventually reports whether cond becomes true within two seconds.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
