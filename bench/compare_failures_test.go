package bench

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestComparePOSTAfterServerGotIt: the server received and processed an
// unkeyed POST, then answered 503. Sending it again may apply it twice.
// The other libraries retry it as is. httpretry adds an Idempotency-Key
// (the same on every attempt) and retries; with keys turned off it sends
// the POST once.
func TestComparePOSTAfterServerGotIt(t *testing.T) {
	noKeys := library{"httpretry-keys-disabled", func(base http.RoundTripper, _ time.Duration) http.RoundTripper {
		return &httpretry.Transport{Base: base, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0), Keys: httpretry.KeyPolicy{Disabled: true}}}
	}}
	sent := map[string]int{"httpretry": 4, "retryablehttp": 4, "failsafehttp": 4, "httpretry-keys-disabled": 1}
	keyed := map[string]bool{"httpretry": true}
	for _, lib := range append(libraries[:len(libraries):len(libraries)], noKeys) {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 503)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("charge 10 EUR"))
			resp, err := lib.new(newBare(), 0).RoundTrip(req)
			if err == nil {
				closeResp(resp)
			}
			require.Equal(t, sent[lib.name], srv.received(), "POSTs the server processed")
			for _, b := range srv.bodies {
				assert.Equal(t, "charge 10 EUR", b, "every attempt carries the whole body")
			}
			if keyed[lib.name] {
				assert.NotEmpty(t, srv.keys[0])
				for _, k := range srv.keys {
					assert.Equal(t, srv.keys[0], k, "one key for every attempt")
				}
			} else {
				for _, k := range srv.keys {
					assert.Empty(t, k, "no Idempotency-Key")
				}
			}
		})
	}
}

// TestCompareTLSUnknownAuthority: a certificate from an unknown authority
// will not become valid by retrying. failsafehttp's check asserts
// x509.UnknownAuthorityError directly on url.Error.Err, which since Go 1.20
// holds a *tls.CertificateVerificationError (and a RoundTripper's error is
// not a *url.Error at all), so it retries.
func TestCompareTLSUnknownAuthority(t *testing.T) {
	attempts := map[string]int32{"httpretry": 1, "retryablehttp": 1, "failsafehttp": 4}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes are the point
			srv.StartTLS()
			t.Cleanup(srv.Close)
			tr := &tracker{base: newBare()} // trusts only the system roots
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := lib.new(tr, 0).RoundTrip(req)
			require.Error(t, err)
			assert.Nil(t, resp)
			var cve *tls.CertificateVerificationError
			assert.ErrorAs(t, err, &cve, "the certificate error is reachable")
			assert.Equal(t, attempts[lib.name], tr.attempts.Load(), "attempts")
		})
	}
}

// TestCompareLastResponseOnExhaustion: every attempt gets a 503. httpretry
// returns the last 503 itself, unread; go-retryablehttp drains and closes
// it and returns only an error; failsafehttp returns an ExceededError that
// holds the last response, and a nil response.
func TestCompareLastResponseOnExhaustion(t *testing.T) {
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			srv := newScripted(t, 503)
			tr := &tracker{base: newBare()}
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := lib.new(tr, 0).RoundTrip(req)
			assert.Equal(t, 4, srv.received())
			switch lib.name {
			case "httpretry":
				require.NoError(t, err)
				require.NotNil(t, resp)
				assert.Equal(t, 503, resp.StatusCode)
				b, _ := io.ReadAll(resp.Body)
				assert.Equal(t, "answer Service Unavailable", string(b), "body unread until now")
				resp.Body.Close()
			case "retryablehttp":
				assert.Nil(t, resp)
				require.Error(t, err)
				assert.Contains(t, err.Error(), "giving up after 4 attempt(s)")
				assert.Equal(t, []bool{true, true, true, true}, tr.closed(), "the last 503 is drained and closed too")
			case "failsafehttp":
				assert.Nil(t, resp)
				var ee retrypolicy.ExceededError
				require.ErrorAs(t, err, &ee)
				last, ok := ee.LastResult.(*http.Response)
				require.True(t, ok, "the last response is inside the error")
				assert.Equal(t, 503, last.StatusCode)
				closeResp(last)
			}
			if err != nil {
				assert.False(t, errors.Is(err, httpretry.ErrBudgetExhausted))
			}
		})
	}
}
