package httpretry_test

import (
	"testing"

	"github.com/seedhq/httpretry"

	"github.com/seedhq/httpretry/internal/invariants"
)

// The invariants harness lives in internal/invariants; these run it,
// giving it the one way into a Transport the public API does not offer.
// See invariants.Invariants for what it does and its environment
// variables (HTTPRETRY_SCENARIOS, HTTPRETRY_SEED, HTTPRETRY_REPORT, …).

var harness = invariants.Options{SetHostLimit: httpretry.SetHostLimit}

func TestInvariants(t *testing.T)            { invariants.Invariants(t, harness) }
func TestInvariantsReportLeaks(t *testing.T) { invariants.ReportLeaks(t) }
func FuzzInvariantsHeaders(f *testing.F)     { invariants.FuzzHeaders(f, harness) }
func FuzzInvariantsResponseHead(f *testing.F) {
	invariants.FuzzResponseHead(f, harness)
}
