// Tokenrefresh shows Policy.PrepareRetry refreshing an expired access token
// after a 401, so the retry carries a fresh one, against a local API whose
// tokens expire. It needs no network beyond 127.0.0.1.
//
//	go run ./examples/tokenrefresh
//
// A 401 is fatal by default: retrying the same credentials cannot help.
// Here Classify makes the one 401 that a new token can fix (the server says
// error="invalid_token", RFC 6750 § 3.1) transient, and PrepareRetry, which
// sees the attempt that failed and the next attempt's request (a clone: the
// caller's request is never touched), fetches a new token and sets it. If
// the refresh fails, PrepareRetry refuses the retry and the caller gets the
// 401 in hand.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"github.com/seedhq/httpretry"
)

func main() {
	api := newAPI()
	srv := httptest.NewServer(api)
	defer srv.Close()
	if err := run(os.Stdout, srv.URL, nil, api); err != nil {
		log.Fatal(err)
	}
}

// run calls the API at baseURL through httpretry over base (nil: the
// Transport's own), with tokens from api's issuer, and reports to out.
func run(out io.Writer, baseURL string, base http.RoundTripper, api *api) error {
	tokens := &tokenSource{issue: api.issue}
	client := &http.Client{Transport: &httpretry.Transport{
		Base:   base,
		Policy: refreshingPolicy(tokens),
		OnAttempt: func(a httpretry.Attempt) {
			outcome := ""
			if a.Err != nil {
				outcome = a.Err.Error()
			} else {
				outcome = a.Response.Status
			}
			next := "done: " + a.Stop.String()
			if a.Retry {
				next = "retry"
			}
			fmt.Fprintf(out, "   attempt %d with %s -> %s [%s] %s\n", a.N, a.Request.Header.Get("Authorization"), outcome, a.Class, next)
		},
		OnCall: func(c httpretry.Call) {
			if c.Stop == httpretry.StopRefused {
				fmt.Fprintf(out, "   retry not sent: %s\n", c.Stop)
			}
		},
	}}

	get := func() error {
		req, err := http.NewRequest(http.MethodGet, baseURL+"/v1/profile", nil)
		if err != nil {
			return err
		}
		tok, err := tokens.Token()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(out, "   => error: %v\n", err)
			return nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(out, "   => %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return nil
	}

	fmt.Fprintln(out, "1. GET /v1/profile with a valid token")
	if err := get(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\n2. The server revokes the token early; the 401 says invalid_token,")
	fmt.Fprintln(out, "   PrepareRetry fetches a new one for the retry")
	api.revokeAll()
	if err := get(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\n3. The token is revoked and the issuer is down: PrepareRetry refuses,")
	fmt.Fprintln(out, "   and the 401 in hand is returned")
	api.revokeAll()
	api.setIssuerDown(true)
	return get()
}

// refreshingPolicy retries a 401 that a new token can fix, after getting
// one from tokens.
func refreshingPolicy(tokens *tokenSource) httpretry.Policy {
	return httpretry.Policy{
		MaxAttempts: 2, // one retry with a fresh token is enough
		Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
			if resp != nil && resp.StatusCode == http.StatusUnauthorized &&
				strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
				return httpretry.ClassTransient
			}
			return httpretry.ClassDefault
		},
		PrepareRetry: func(prev httpretry.Attempt, next *http.Request) error {
			if prev.Response == nil || prev.Response.StatusCode != http.StatusUnauthorized {
				return nil // another failure: the credentials were fine
			}
			stale := strings.TrimPrefix(prev.Request.Header.Get("Authorization"), "Bearer ")
			tok, err := tokens.Refresh(stale)
			if err != nil {
				return fmt.Errorf("refreshing the access token: %w", err)
			}
			next.Header.Set("Authorization", "Bearer "+tok)
			return nil
		},
	}
}

// tokenSource caches an access token and refreshes it on demand. Concurrent
// retries that saw the same stale token share one refresh.
type tokenSource struct {
	issue func() (string, error)

	mu  sync.Mutex
	tok string
}

// Token returns the cached token, fetching one if there is none.
func (s *tokenSource) Token() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok == "" {
		tok, err := s.issue()
		if err != nil {
			return "", err
		}
		s.tok = tok
	}
	return s.tok, nil
}

// Refresh replaces stale with a new token, unless another caller already
// did.
func (s *tokenSource) Refresh(stale string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && s.tok != stale {
		return s.tok, nil
	}
	tok, err := s.issue()
	if err != nil {
		return "", err
	}
	s.tok = tok
	return tok, nil
}

// api is a local API that accepts the tokens its issuer handed out and not
// yet revoked.
type api struct {
	mu         sync.Mutex
	next       int
	valid      map[string]bool
	issuerDown bool
}

func newAPI() *api { return &api{valid: map[string]bool{}} }

var errIssuerDown = errors.New("token endpoint unavailable")

// issue hands out a new token, as an OAuth 2 token endpoint would.
func (a *api) issue() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.issuerDown {
		return "", errIssuerDown
	}
	a.next++
	tok := fmt.Sprintf("tok-%d", a.next)
	a.valid[tok] = true
	return tok, nil
}

func (a *api) revokeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.valid)
}

func (a *api) setIssuerDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.issuerDown = down
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	ok := a.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	a.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="the access token expired"`)
		http.Error(w, "token expired", http.StatusUnauthorized)
		return
	}
	fmt.Fprintln(w, `{"login":"gopher"}`)
}
