package httpretry_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Endpoints belong to the host key they are declared on (and its path
// keys). Set on Transport.Policy or a wildcard key they would move the
// requests of every host they cover — a third party's, with its
// Authorization, cookies and body — to the program's own mirror: Validate
// refuses them there, and so does every request until it is fixed.
// (Validate accepted them, and a 503 from auth.thirdparty.example moved
// the request, credentials and all.)
func TestEndpointsAreRefusedWhereTheyReachOtherHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		policy httpretry.Policy
		hosts  map[string]httpretry.Policy
		field  string
	}{
		{"Policy", httpretry.Policy{Endpoints: []string{"mirror.internal"}}, nil, "Policy.Endpoints"},
		{"wildcard", httpretry.Policy{}, map[string]httpretry.Policy{
			"*.example": {Endpoints: []string{"mirror.internal"}}}, `Hosts["*.example"].Endpoints`},
		{"wildcard path", httpretry.Policy{}, map[string]httpretry.Policy{
			"*.example/v1": {Endpoints: []string{"mirror.internal"}}}, `Hosts["*.example/v1"].Endpoints`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := httpretrytest.NewScript(httpretrytest.Status(503))
				tr := &httpretry.Transport{Base: base, Policy: tc.policy, Hosts: tc.hosts}
				err := tr.Validate()
				require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
				assert.ErrorContains(t, err, tc.field+":")
				assert.ErrorContains(t, err, "exact host")

				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://auth.thirdparty.example/v1/pay",
					strings.NewReader("client_secret=s3cret"))
				req.Header.Set("Authorization", "Bearer third-party")
				_, err = tr.RoundTrip(req)
				require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
				for _, r := range base.Requests() {
					assert.NotEqual(t, "mirror.internal", r.URL.Host, "a third party's request reached the mirror")
				}
			})
		})
	}
}

// On an exact host key, and on its path keys, Endpoints move only that
// host's requests; every other host stays where its request names it.
func TestEndpointsMoveOnlyTheirHost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).
			On(func(req *http.Request) bool { return req.URL.Hostname() == "eu.test" }, httpretrytest.Status(503)).
			On(onHost("auth.thirdparty.example"), httpretrytest.Status(503))
		p := failoverPolicy()
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{
			"eu.test":         p,
			"eu.test:8443/v2": {Endpoints: []string{"ap.test:8443"}},
		}}
		require.NoError(t, tr.Validate())
		for _, url := range []string{"https://eu.test/v1/pay", "https://eu.test:8443/v2/pay", "https://auth.thirdparty.example/token"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer x")
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		var hosts []string
		for _, r := range base.Requests() {
			hosts = append(hosts, r.URL.Host)
		}
		assert.Equal(t, []string{"eu.test", "us.test", "eu.test:8443", "ap.test:8443",
			"auth.thirdparty.example", "auth.thirdparty.example", "auth.thirdparty.example", "auth.thirdparty.example"}, hosts)
	})
}

// Per request, WithPolicy may keep, drop or reorder the endpoints its
// host's key declares, not add one: its context can reach requests to
// other hosts (an SDK's token refresh under the caller's context).
func TestWithPolicyCannotAddAnEndpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := httpretrytest.NewScript(httpretrytest.Status(200)).On(onHost("eu.test"), httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: base, Hosts: map[string]httpretry.Policy{"eu.test": failoverPolicy()}}
		do := func(url string, edit func(*httpretry.Policy)) error {
			ctx := httpretry.WithPolicy(t.Context(), edit)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			return err
		}
		require.NoError(t, do("https://eu.test/", func(p *httpretry.Policy) { p.Endpoints = []string{"ap.test"} }))
		err := do("https://eu.test/", func(p *httpretry.Policy) { p.Endpoints = append(p.Endpoints, "mirror.internal") })
		require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
		assert.ErrorContains(t, err, `WithPolicy.Endpoints[2]: "mirror.internal"`)
		err = do("https://other.test/", func(p *httpretry.Policy) { p.Endpoints = []string{"mirror.internal"} })
		require.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
		hosts := hostsOf(base.Requests())
		assert.Equal(t, []string{"eu.test", "ap.test"}, hosts)
	})
}
