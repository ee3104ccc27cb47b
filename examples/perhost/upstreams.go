package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// chargeLedger stands in for the payments API. It answers the first request
// of each Idempotency-Key with 503 and Retry-After, as an overloaded
// service does, and applies a charge once per key: a repeated key gets the
// stored answer back. A charge without a key is refused.
type chargeLedger struct {
	retryAfter string

	mu      sync.Mutex
	seen    map[string]int    // key → requests
	charges map[string]string // key → charge id
	keys    []string          // Idempotency-Key of every request, in order
}

func newChargeLedger(retryAfter string) *chargeLedger {
	return &chargeLedger{retryAfter: retryAfter, seen: map[string]int{}, charges: map[string]string{}}
}

func (l *chargeLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		http.NotFound(w, r)
		return
	}
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	l.seen[key]++
	if l.seen[key] == 1 {
		w.Header().Set("Retry-After", l.retryAfter)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	id, ok := l.charges[key]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(l.charges)+1)
		l.charges[key] = id
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "charge %s\n", id)
}

// applied returns the number of charges made.
func (l *chargeLedger) applied() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.charges)
}

// requestKeys returns the Idempotency-Key of every request, in order.
func (l *chargeLedger) requestKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// slowFirst stands in for the search API. Its first request stalls, as a
// replica in a long GC pause does, until the client gives up on it; every
// later request answers at once.
type slowFirst struct {
	mu        sync.Mutex
	requests  int
	abandoned int // stalled requests whose client went away
}

func (s *slowFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	first := s.requests == 1
	s.mu.Unlock()
	if first {
		select {
		case <-r.Context().Done():
			s.mu.Lock()
			s.abandoned++
			s.mu.Unlock()
			return
		case <-time.After(10 * time.Second): // a safety net; the client gives up long before
		}
	}
	fmt.Fprintf(w, "3 results for %q\n", r.URL.Query().Get("q"))
}

// counts returns the requests received and how many of them the client
// abandoned.
func (s *slowFirst) counts() (requests, abandoned int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.abandoned
}
