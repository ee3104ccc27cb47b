package main

import (
	"bytes"
	"testing"
	"testing/synctest"

	"github.com/seedhq/httpretry/httpretrytest"
)

// TestTokenRefresh runs the example in memory, on the fake clock, and
// checks its whole output: a revoked token is refreshed before the retry,
// and a failed refresh returns the 401 in hand.
func TestTokenRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		var out bytes.Buffer
		if err := run(&out, "http://api.test", &httpretrytest.HandlerTransport{Handler: api}, api); err != nil {
			t.Fatal(err)
		}
		want := `1. GET /v1/profile with a valid token
   attempt 1 with Bearer tok-1 -> 200 OK [success] done: success
   => 200 OK: {"login":"gopher"}

2. The server revokes the token early; the 401 says invalid_token,
   PrepareRetry fetches a new one for the retry
   attempt 1 with Bearer tok-1 -> 401 Unauthorized [transient] retry
   attempt 2 with Bearer tok-2 -> 200 OK [success] done: success
   => 200 OK: {"login":"gopher"}

3. The token is revoked and the issuer is down: PrepareRetry refuses,
   and the 401 in hand is returned
   attempt 1 with Bearer tok-2 -> 401 Unauthorized [transient] retry
   retry not sent: retry refused by PrepareRetry
   => 401 Unauthorized: token expired
`
		if got := out.String(); got != want {
			t.Errorf("output:\n%s\nwant:\n%s", got, want)
		}
	})
}
