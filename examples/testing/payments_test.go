package main

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

// The test the issue asks for: the application's Charge succeeds after two
// 503s, in exactly 3 attempts that carry one idempotency key and one body.
// Inside synctest.Test the backoff waits run on a fake clock: the test
// takes no real time, and no socket is opened.
func TestChargeSucceedsAfterTwo503s(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(
			httpretrytest.Status(http.StatusServiceUnavailable),
			httpretrytest.Status(http.StatusServiceUnavailable),
			httpretrytest.Respond(http.StatusCreated, `{"id":"ch_1","amount":1999}`),
		)
		payments := NewPayments("https://payments.example", upstream, nil)

		charge, err := payments.Charge(t.Context(), 1999)
		if err != nil {
			t.Fatalf("Charge: %v", err)
		}
		if charge.ID != "ch_1" || charge.Amount != 1999 {
			t.Errorf("Charge = %+v, want ch_1 for 1999", charge)
		}
		reqs := upstream.Requests()
		httpretrytest.CheckAttempts(t, reqs, 3)
		httpretrytest.CheckSameKey(t, reqs)
		httpretrytest.CheckSameBody(t, reqs)
		httpretrytest.CheckBodiesClosed(t, reqs) // Charge closed its response, httpretry the two 503s
		if got := string(reqs[0].Body); got != `{"amount":1999}` {
			t.Errorf("body sent: %s", got)
		}
	})
}

// A decline is final: one attempt, and the API's message reaches the caller.
func TestChargeDeclinedIsNotRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Respond(http.StatusPaymentRequired, "card declined"))
		_, err := NewPayments("https://payments.example", upstream, nil).Charge(t.Context(), 1999)
		if err == nil || !strings.Contains(err.Error(), "402 Payment Required: card declined") {
			t.Errorf("Charge error = %v, want the decline", err)
		}
		httpretrytest.CheckAttempts(t, upstream.Requests(), 1)
	})
}

// The failure that keys exist for: the API applies the charge, and the
// answer is lost on the way back. The retry carries the same key, so the
// API answers with the charge it made instead of charging again. The fake
// API runs in memory; the lost answer comes from package chaos, which a
// test can use as well as a rehearsal.
func TestChargeAppliedOnceWhenTheAnswerIsLost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		api := newFakePayments()
		upstream := &httpretrytest.HandlerTransport{Handler: api}
		loseFirst := &chaos.Transport{Next: upstream, Rules: []chaos.Rule{{
			Rate:  1,
			Fault: chaos.Reset(),
			If: func(r *http.Request) bool {
				n, _ := httpretry.AttemptFromContext(r.Context())
				return n == 1
			},
		}}}
		charge, err := NewPayments("https://payments.example", loseFirst, nil).Charge(t.Context(), 500)
		if err != nil {
			t.Fatalf("Charge: %v", err)
		}
		if charge.ID != "ch_1" {
			t.Errorf("charge %q, want the one applied on the first attempt", charge.ID)
		}
		reqs := upstream.Requests()
		httpretrytest.CheckAttempts(t, reqs, 2)
		httpretrytest.CheckSameKey(t, reqs)
		if applied, repeats := api.ledger(); applied != 1 || repeats != 1 {
			t.Errorf("ledger: %d applied, %d repeats; want 1 and 1", applied, repeats)
		}
	})
}
