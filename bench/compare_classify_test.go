package bench

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// retriedStatuses is what each library retries, among the statuses
// TestCompareRetriedStatuses sends: httpretry the transient list of RFC
// 9110 (408, 425, 429, 500, 502, 503, 504); go-retryablehttp and
// failsafehttp 429 and every 5xx but 501, so 505 (HTTP Version Not
// Supported), 507 (Insufficient Storage) and 511 (Network Authentication
// Required) too, and neither 408 nor 425.
var retriedStatuses = map[string][]int{
	"httpretry":     {408, 425, 429, 500, 502, 503, 504},
	"retryablehttp": {429, 500, 502, 503, 504, 505, 507, 511},
	"failsafehttp":  {429, 500, 502, 503, 504, 505, 507, 511},
}

// TestCompareRetriedStatuses sends a GET to a server that answers one
// status and then 200, for each status below, and records which statuses
// each library retried (its default classification, 4 attempts, no waits).
func TestCompareRetriedStatuses(t *testing.T) {
	statuses := []int{400, 404, 408, 409, 425, 429, 500, 501, 502, 503, 504, 505, 507, 511}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			var retried []int
			for _, status := range statuses {
				srv := newScripted(t, status, 200)
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				resp, err := lib.new(newBare(), 0).RoundTrip(req)
				if err == nil {
					closeResp(resp)
				}
				switch srv.received() {
				case 1:
				case 2:
					retried = append(retried, status)
				default:
					t.Errorf("%d: %d attempts", status, srv.received())
				}
				srv.Close()
			}
			slices.Sort(retried)
			assert.Equal(t, retriedStatuses[lib.name], retried, "statuses retried")
			t.Log(fmt.Sprint("retried: ", retried))
		})
	}
}

// TestCompareDNSNotFound: the Base fails every attempt with a DNS
// "no such host" error, as a lookup of a name that does not exist does.
// httpretry treats it as fatal: the name will not appear by retrying. The
// other two retry it like any other transport error, up to their limit.
func TestCompareDNSNotFound(t *testing.T) {
	attempts := map[string]int{"httpretry": 1, "retryablehttp": 4, "failsafehttp": 4}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			n := 0
			base := roundTripFunc(func(*http.Request) (*http.Response, error) {
				n++
				return nil, &net.OpError{Op: "dial", Net: "tcp",
					Err: &net.DNSError{Err: "no such host", Name: "api.example.invalid", IsNotFound: true}}
			})
			req, _ := http.NewRequest(http.MethodGet, "http://api.example.invalid/", nil)
			resp, err := lib.new(base, 0).RoundTrip(req)
			assert.Nil(t, resp)
			var dns *net.DNSError
			assert.ErrorAs(t, err, &dns, "the DNS error is reachable")
			assert.Equal(t, attempts[lib.name], n, "attempts")
		})
	}
}
