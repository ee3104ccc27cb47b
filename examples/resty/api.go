package main

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// flakyAPI is an order API that fails the way APIs behind a busy gateway
// do, and creates each order once per Idempotency-Key.
type flakyAPI struct {
	mu     sync.Mutex
	hits   map[string]int
	orders map[string]int      // Idempotency-Key → order ID
	bodies map[string][]string // path → request bodies received
	keys   map[string][]string // path → Idempotency-Key of each request
}

func newFlakyAPI() *flakyAPI {
	return &flakyAPI{hits: map[string]int{}, orders: map[string]int{},
		bodies: map[string][]string{}, keys: map[string][]string{}}
}

func (api *flakyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	api.mu.Lock()
	defer api.mu.Unlock()
	api.hits[r.URL.Path]++
	api.bodies[r.URL.Path] = append(api.bodies[r.URL.Path], string(body))
	api.keys[r.URL.Path] = append(api.keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
	n := api.hits[r.URL.Path]
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/orders/7":
		if n <= 2 {
			http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": 7, "status": "shipped"})
	case r.Method == http.MethodPost && r.URL.Path == "/orders":
		key := r.Header.Get("Idempotency-Key")
		id, seen := api.orders[key]
		if !seen || key == "" {
			id = 100 + len(api.orders)
			api.orders[key] = id // created, whatever happens to the answer
		}
		if n == 1 {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"id": id, "status": "created"})
	default:
		http.NotFound(w, r)
	}
}

func (api *flakyAPI) orderCount() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return len(api.orders)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
