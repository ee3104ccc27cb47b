package httpretrytest

import (
	"bytes"
	"strconv"
	"strings"
)

// TB is the part of testing.TB that the Check functions use: a *testing.T,
// a *testing.B, or a recorder of the caller's own. The package asks for no
// more, so that it does not tie its users to any assertion library.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// CheckAttempts reports whether reqs are exactly want attempts numbered 1
// to want in order, as one request through an httpretry.Transport makes
// when it takes want attempts. Requests that did not come through a
// Transport (Attempt 0) are only counted. Otherwise it calls t.Errorf and
// returns false.
func CheckAttempts(t TB, reqs []Request, want int) bool {
	t.Helper()
	ok := len(reqs) == want
	for i, r := range reqs {
		if r.Attempt != 0 && r.Attempt != i+1 {
			ok = false
		}
	}
	if !ok {
		t.Errorf("httpretrytest: got %d attempt(s) numbered %s, want %d numbered 1 to %d", len(reqs), attemptNumbers(reqs), want, want)
	}
	return ok
}

// CheckSameKey reports whether every request carried the same, non-empty
// idempotency key, as the attempts of one request through an
// httpretry.Transport must. Otherwise it calls t.Errorf and returns false.
func CheckSameKey(t TB, reqs []Request) bool {
	t.Helper()
	if len(reqs) == 0 {
		t.Errorf("httpretrytest: no requests, so no key")
		return false
	}
	for i, r := range reqs {
		if r.Key == "" {
			t.Errorf("httpretrytest: attempt %d carried no idempotency key", i+1)
			return false
		}
		if r.Key != reqs[0].Key {
			t.Errorf("httpretrytest: attempt %d carried key %q, attempt 1 carried %q", i+1, r.Key, reqs[0].Key)
			return false
		}
	}
	return true
}

// CheckSameBody reports whether every request carried the same body bytes,
// as the attempts of one request must when the body is replayed. Otherwise
// it calls t.Errorf and returns false.
func CheckSameBody(t TB, reqs []Request) bool {
	t.Helper()
	for i, r := range reqs {
		if !bytes.Equal(r.Body, reqs[0].Body) {
			t.Errorf("httpretrytest: attempt %d sent body %q, attempt 1 sent %q", i+1, r.Body, reqs[0].Body)
			return false
		}
	}
	return true
}

// CheckBodiesClosed reports whether every response body handed out to
// reqs was closed exactly once. Call it after closing the response you
// received: then it proves the client closed each response it discarded,
// and no body twice. Otherwise it calls t.Errorf and returns false.
func CheckBodiesClosed(t TB, reqs []Request) bool {
	t.Helper()
	ok := true
	for i, r := range reqs {
		if r.ResponseBody != nil && r.ResponseBody.Closes() != 1 {
			t.Errorf("httpretrytest: response body of attempt %d closed %d time(s), want 1", i+1, r.ResponseBody.Closes())
			ok = false
		}
	}
	return ok
}

// CheckDiscardedClosed reports whether every response body handed out to
// reqs but the last was closed exactly once, and the last one not at all:
// what a client that returned the last response to its caller, still open,
// must have done. (Under hedging, the last response handed out need not be
// the one returned: use [CheckBodiesClosed] there.) Otherwise it calls
// t.Errorf and returns false.
func CheckDiscardedClosed(t TB, reqs []Request) bool {
	t.Helper()
	last := -1
	for i, r := range reqs {
		if r.ResponseBody != nil {
			last = i
		}
	}
	ok := true
	for i, r := range reqs {
		if r.ResponseBody == nil {
			continue
		}
		want := 1
		if i == last {
			want = 0
		}
		if got := r.ResponseBody.Closes(); got != want {
			what := "discarded response body"
			if i == last {
				what = "returned response body"
			}
			t.Errorf("httpretrytest: %s of attempt %d closed %d time(s), want %d", what, i+1, got, want)
			ok = false
		}
	}
	return ok
}

func attemptNumbers(reqs []Request) string {
	s := make([]string, len(reqs))
	for i, r := range reqs {
		s[i] = strconv.Itoa(r.Attempt)
	}
	return "[" + strings.Join(s, " ") + "]"
}
