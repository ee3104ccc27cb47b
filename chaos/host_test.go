package chaos_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/chaos"
	"github.com/seedhq/httpretry/httpretrytest"
)

// hostCases is one table of host patterns and the URLs they do and do not
// name, run against both chaos's Rule.Host and httpretry's Transport.Hosts,
// so that the two cannot drift apart.
var hostCases = []struct {
	name, pattern, url string
	match              bool
}{
	{"exact", "payments.internal", "https://payments.internal/v1", true},
	{"other host", "payments.internal", "https://ledger.internal/v1", false},
	{"not a suffix match", "payments.internal", "https://payments.internal.evil.com/", false},
	{"no port means any port", "payments.internal", "https://payments.internal:8443/", true},
	{"port given", "payments.internal:8443", "https://payments.internal:8443/", true},
	{"other port", "payments.internal:8443", "https://payments.internal/", false},
	{"https default port", "payments.internal:443", "https://payments.internal/v1", true},
	{"http default port", "payments.internal:80", "http://payments.internal/v1", true},
	{"default port of the other scheme", "payments.internal:443", "http://payments.internal/", false},
	{"default port written", "payments.internal:443", "https://payments.internal:443/", true},
	{"default port, other port written", "payments.internal:443", "https://payments.internal:8443/", false},
	{"pattern in upper case", "Payments.INTERNAL", "https://payments.internal/", true},
	{"URL in upper case", "payments.internal:443", "https://PAYMENTS.Internal/", true},
	{"pattern with trailing dot", "payments.internal.", "https://payments.internal/", true},
	{"URL with trailing dot", "payments.internal:443", "https://payments.internal./", true},
	{"wildcard", "*.example.com", "https://api.eu.example.com:8443/", true},
	{"wildcard is not its suffix", "*.example.com", "https://example.com/", false},
	{"wildcard is not a longer name", "*.example.com", "https://badexample.com/", false},
	{"wildcard in upper case, URL with trailing dot", "*.Example.COM", "https://API.example.com./", true},
	{"wildcard with default port", "*.example.com:443", "https://api.example.com/", true},
	{"wildcard with other port", "*.example.com:443", "https://api.example.com:8443/", false},
	{"IPv6 without port", "::1", "http://[::1]:8080/", true},
	{"IPv6 with port", "[::1]:8080", "http://[::1]:8080/", true},
	{"IPv6 with other port", "[::1]:8080", "http://[::1]:9090/", false},
	{"IPv6 with default port", "[::1]:443", "https://[::1]/", true},
	{"IPv6 with the other scheme's default port", "[::1]:80", "https://[::1]/", false},
	{"IPv6 other address", "::1", "http://[::2]/", false},
}

// TestRuleHostMatchesAsTransportHosts: Rule.Host selects exactly the
// requests that the same key of Transport.Hosts applies to: host names
// case-insensitive, a trailing dot dropped, a URL without a port matching
// the scheme's default, IPv6 in brackets.
func TestRuleHostMatchesAsTransportHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range hostCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("chaos", func(t *testing.T) {
				tr := &chaos.Transport{
					Next:  httpretrytest.NewScript(httpretrytest.Status(200)),
					Rules: []chaos.Rule{{Host: tc.pattern, Rate: 1, Fault: chaos.Status(418)}},
				}
				resp, err := tr.RoundTrip(get(t, t.Context(), tc.url))
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				assert.Equal(t, tc.match, resp.StatusCode == 418, "Rule.Host %q selects %s", tc.pattern, tc.url)
			})
			t.Run("httpretry", func(t *testing.T) {
				upstream := httpretrytest.NewScript(httpretrytest.Status(200))
				tr := &httpretry.Transport{
					Base:  upstream,
					Hosts: map[string]httpretry.Policy{tc.pattern: {AttemptHeader: "X-Matched"}},
				}
				require.NoError(t, tr.Validate())
				resp, err := tr.RoundTrip(get(t, t.Context(), tc.url))
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				reqs := upstream.Requests()
				require.Len(t, reqs, 1)
				assert.Equal(t, tc.match, reqs[0].Header.Get("X-Matched") != "", "Hosts key %q applies to %s", tc.pattern, tc.url)
			})
		})
	}
}
