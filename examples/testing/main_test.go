package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
)

// The rehearsal runs as it would in staging, on synctest's fake clock and
// against the in-memory API; what it prints must add up.
func TestRehearsal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    rehearsal
	}{
		{"1% 503s", rehearsal{Charges: 1000, Workers: 4, Rate503: 0.01, Seed: 1}},
		{"503s and lost answers", rehearsal{Charges: 1000, Workers: 4, Rate503: 0.01, RateReset: 0.01, Seed: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var out bytes.Buffer
				o := rehearse(t.Context(), &out, tc.r)
				t.Log("\n" + out.String())

				n := int64(tc.r.Charges)
				if o.Succeeded != n || o.Failed != 0 {
					t.Errorf("%d succeeded, %d failed; want all %d to succeed", o.Succeeded, o.Failed, n)
				}
				if o.Attempts != n+o.Retries {
					t.Errorf("%d attempts for %d charges and %d retries", o.Attempts, n, o.Retries)
				}
				injected := o.Injected503 + o.InjectedReset
				if o.Retries != injected {
					t.Errorf("%d retries for %d injected faults: each fault should cost one retry", o.Retries, injected)
				}
				// 1000 charges at 1 %: 10 expected, σ ≈ 3; the draws are
				// seeded, the bounds only guard against a rate that is off.
				if o.Injected503 < 1 || o.Injected503 > 25 {
					t.Errorf("%d 503s injected into about 1000 attempts at 1 %%", o.Injected503)
				}
				if tc.r.RateReset > 0 && o.InjectedReset == 0 {
					t.Errorf("no answer lost at %v", tc.r.RateReset)
				}
				if o.Applied != tc.r.Charges || int64(o.Repeats) != o.InjectedReset {
					t.Errorf("ledger: %d applied, %d repeats; want %d applied and one repeat per lost answer (%d)",
						o.Applied, o.Repeats, tc.r.Charges, o.InjectedReset)
				}
				for _, want := range []string{
					"rehearsal: 1000 charges, 4 at a time, to an in-memory payments API",
					"charges:   1000 succeeded, 0 failed",
					"ledger:    1000 charges applied",
				} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("report lacks %q", want)
					}
				}
			})
		})
	}
}
