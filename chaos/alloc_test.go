package chaos_test

import (
	"net/http"
	"testing"

	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

// shared is one response for every call, so that the in-memory upstream
// allocates nothing and what is measured is the Transport's own cost.
var shared = &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}

var free = httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return shared, nil })

// quietCases are the paths on which a Transport must add no allocation to
// Next's: disabled, and enabled without striking.
func quietCases() map[string]http.RoundTripper {
	rules := []chaos.Rule{
		{Name: "elsewhere", Host: "other.example.com", Rate: 1, Fault: chaos.Status(503)},
		{Name: "other path", PathPrefix: "/v2/", Rate: 1, Fault: chaos.Status(503)},
		{Name: "drawn, never strikes", Method: http.MethodGet, Rate: 1e-12, Fault: chaos.Status(503)},
	}
	disabled := &chaos.Transport{Next: free, Rules: rules}
	disabled.SetEnabled(false)
	return map[string]http.RoundTripper{
		"bare":                  free,
		"disabled":              disabled,
		"enabled, not striking": &chaos.Transport{Next: free, Rules: rules},
	}
}

func TestNoAllocationWhenNotStriking(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/things", nil)
	for name, rt := range quietCases() {
		rt.RoundTrip(req) // the first draw seeds the source, once
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per request, want 0", name, allocs)
		}
	}
}

// BenchmarkTransport measures what a Transport adds to Next on the paths
// that inject nothing; compare the ns/op and allocs/op of each case with
// "bare" (go test -run '^$' -bench Transport -benchmem ./chaos).
func BenchmarkTransport(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/things", nil)
	for _, name := range []string{"bare", "disabled", "enabled, not striking"} {
		rt := quietCases()[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
