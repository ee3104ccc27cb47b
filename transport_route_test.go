package httpretry_test

import (
	"os"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// TestRoute is the GET that docs/design.md traces through the files of
// the root package: a 503, then a 200, with the default policy, after a
// warm-up GET that has done what a Transport does once. scripts/route runs
// it twice with a coverage profile, the second time with
// HTTPRETRY_ROUTE=warm-up, which stops after the warm-up: the blocks the
// first run ran more often are the traced GET's.
func TestRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := httpretrytest.NewScript(httpretrytest.Status(200), httpretrytest.Status(503), httpretrytest.Status(200))
		tr := &httpretry.Transport{Base: up}
		resp, err := tr.RoundTrip(get(t, t.Context())) // the warm-up
		require.NoError(t, err)
		resp.Body.Close()
		if os.Getenv("HTTPRETRY_ROUTE") == "warm-up" {
			return
		}
		resp, err = tr.RoundTrip(get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		require.Len(t, up.Requests(), 3)
	})
}
