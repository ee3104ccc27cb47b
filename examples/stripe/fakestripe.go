package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
)

// fakeStripe serves POST /v1/charges as Stripe does for what this example
// needs: a charge is created once per Idempotency-Key, and a request that
// repeats a key gets the first answer again, with Idempotent-Replayed: true
// (https://docs.stripe.com/api/idempotent_requests). It does not check, as
// Stripe does, that a repeated key comes with the same parameters.
type fakeStripe struct {
	mu      sync.Mutex
	charges int                 // charges created
	byKey   map[string]string   // idempotency key -> the charge's JSON
	keys    map[string][]string // description -> the keys of its requests
	made    map[string]int      // description -> charges created with it
}

func newFakeStripe() *fakeStripe {
	return &fakeStripe{byKey: map[string]string{}, keys: map[string][]string{}, made: map[string]int{}}
}

// start serves the fake behind f's faults on a loopback port.
func (s *fakeStripe) start(f func(http.Handler) *faults) (*httptest.Server, *faults) {
	fl := f(http.HandlerFunc(s.serve))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.note(r)
		fl.ServeHTTP(w, r)
	})), fl
}

// note records the keys of every request that reaches the server.
func (s *fakeStripe) note(r *http.Request) {
	if err := r.ParseForm(); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := r.FormValue("description")
	s.keys[d] = append(s.keys[d], r.Header.Values("Idempotency-Key")...)
}

func (s *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if body, ok := s.byKey[key]; ok && key != "" {
		w.Header().Set("Idempotent-Replayed", "true")
		fmt.Fprint(w, body)
		return
	}
	s.charges++
	s.made[r.FormValue("description")]++
	body := fmt.Sprintf(`{"id":"ch_%d","object":"charge","amount":%s,"currency":%q,"description":%q}`,
		s.charges, r.FormValue("amount"), r.FormValue("currency"), r.FormValue("description"))
	if key != "" {
		s.byKey[key] = body
	}
	fmt.Fprint(w, body)
}

// created returns how many charges the fake has created.
func (s *fakeStripe) created() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charges
}

// duplicates returns how many charges were created beyond the first for
// one description: a payment applied twice.
func (s *fakeStripe) duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.made {
		n += c - 1
	}
	return n
}

// keysSeen returns the Idempotency-Key values of every attempt of the
// charge with the given description, in the order they arrived.
func (s *fakeStripe) keysSeen(description string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[description]...)
}
