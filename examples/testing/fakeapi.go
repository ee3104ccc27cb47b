package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// fakePayments is an in-memory payments API that applies each charge once
// per Idempotency-Key, as real payment APIs do: a repeat of a key is
// answered with the charge it already made.
type fakePayments struct {
	mu      sync.Mutex
	charges map[string]Charge // by key
	repeats int               // requests answered with a charge already made
}

func newFakePayments() *fakePayments {
	return &fakePayments{charges: map[string]Charge{}}
}

func (f *fakePayments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" {
		http.NotFound(w, r)
		return
	}
	var in struct{ Amount int }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 {
		http.Error(w, "invalid charge", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	c, seen := f.charges[key]
	if seen {
		f.repeats++
	} else {
		c = Charge{ID: fmt.Sprintf("ch_%d", len(f.charges)+1), Amount: in.Amount}
		f.charges[key] = c
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(c)
}

// ledger reports how many charges were applied, and how many requests
// repeated a charge already applied and were answered from the ledger.
func (f *fakePayments) ledger() (applied, repeats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.charges), f.repeats
}
