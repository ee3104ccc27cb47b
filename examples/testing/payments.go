package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/seedhq/httpretry"
)

// Payments is the application code under test: a client of a payments API
// that charges cards through httpretry, so that a 503 or a lost answer
// does not fail the charge, and a retried charge is not applied twice.
type Payments struct {
	baseURL string
	client  *http.Client
}

// Charge is what the payments API answers for an applied charge.
type Charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// NewPayments returns a client of the payments API at baseURL. Attempts go
// through base (nil: httpretry's own pooled transport); onAttempt, if not
// nil, observes every attempt, for metrics.
func NewPayments(baseURL string, base http.RoundTripper, onAttempt func(httpretry.Attempt)) *Payments {
	return &Payments{
		baseURL: baseURL,
		client: &http.Client{
			Timeout:   30 * time.Second, // the whole charge, retries included
			Transport: &httpretry.Transport{Base: base, OnAttempt: onAttempt},
		},
	}
}

// Charge charges amount cents. httpretry gives the POST an Idempotency-Key,
// the same on every attempt, so the API applies it once however many
// attempts it takes.
func (p *Payments) Charge(ctx context.Context, amount int) (Charge, error) {
	body, err := json.Marshal(map[string]int{"amount": amount})
	if err != nil {
		return Charge{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.baseURL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return Charge{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return Charge{}, fmt.Errorf("charge: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Charge{}, fmt.Errorf("charge: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var c Charge
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return Charge{}, fmt.Errorf("charge: reading the answer: %w", err)
	}
	return c, nil
}
