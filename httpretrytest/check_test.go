package httpretrytest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry/httpretrytest"
)

// recordingTB keeps what a Check function reports.
type recordingTB struct{ errs []string }

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestChecksReportWhatIsWrong(t *testing.T) {
	t.Parallel()
	key := func(k string) httpretrytest.Request { return httpretrytest.Request{Key: k} }
	body := func(b string) httpretrytest.Request { return httpretrytest.Request{Body: []byte(b)} }
	attempt := func(n int) httpretrytest.Request { return httpretrytest.Request{Attempt: n} }
	for _, tc := range []struct {
		name  string
		check func(httpretrytest.TB) bool
		want  string // "" when the check passes
	}{
		{"attempts", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckAttempts(t, []httpretrytest.Request{attempt(1), attempt(2), attempt(3)}, 3)
		}, ""},
		{"attempts without a Transport", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckAttempts(t, []httpretrytest.Request{attempt(0), attempt(0)}, 2)
		}, ""},
		{"too many attempts", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckAttempts(t, []httpretrytest.Request{attempt(1), attempt(2)}, 1)
		}, "httpretrytest: got 2 attempt(s) numbered [1 2], want 1 numbered 1 to 1"},
		{"attempts of two requests", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckAttempts(t, []httpretrytest.Request{attempt(1), attempt(1)}, 2)
		}, "httpretrytest: got 2 attempt(s) numbered [1 1], want 2 numbered 1 to 2"},
		{"same key", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckSameKey(t, []httpretrytest.Request{key("a"), key("a")})
		}, ""},
		{"no requests, no key", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckSameKey(t, nil)
		}, "httpretrytest: no requests, so no key"},
		{"missing key", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckSameKey(t, []httpretrytest.Request{key("a"), key("")})
		}, "httpretrytest: attempt 2 carried no idempotency key"},
		{"other key", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckSameKey(t, []httpretrytest.Request{key("a"), key("b")})
		}, `httpretrytest: attempt 2 carried key "b", attempt 1 carried "a"`},
		{"same body", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckSameBody(t, []httpretrytest.Request{body("x"), body("x")})
		}, ""},
		{"other body", func(t httpretrytest.TB) bool {
			return httpretrytest.CheckSameBody(t, []httpretrytest.Request{body("x"), body("x"), body("")})
		}, `httpretrytest: attempt 3 sent body "", attempt 1 sent "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recordingTB
			ok := tc.check(&rec)
			if tc.want == "" {
				assert.True(t, ok)
				assert.Empty(t, rec.errs)
			} else {
				assert.False(t, ok)
				assert.Equal(t, []string{tc.want}, rec.errs)
			}
		})
	}
}

func TestChecksOfClosedBodies(t *testing.T) {
	t.Parallel()
	upstream := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Fail(errBoom), httpretrytest.Status(200))
	var resps []*http.Response
	for range 3 {
		resp, _ := upstream.RoundTrip(newReq(t, context.Background(), http.MethodGet, "/", ""))
		resps = append(resps, resp)
	}
	reqs := upstream.Requests()
	require.Len(t, reqs, 3)
	require.Nil(t, reqs[1].ResponseBody, "an error has no body")

	var rec recordingTB
	assert.False(t, httpretrytest.CheckDiscardedClosed(&rec, reqs))
	assert.Equal(t, []string{"httpretrytest: discarded response body of attempt 1 closed 0 time(s), want 1"}, rec.errs)

	resps[0].Body.Close()
	rec = recordingTB{}
	assert.True(t, httpretrytest.CheckDiscardedClosed(&rec, reqs), "%v", rec.errs)
	assert.False(t, httpretrytest.CheckBodiesClosed(&rec, reqs))
	assert.Equal(t, []string{"httpretrytest: response body of attempt 3 closed 0 time(s), want 1"}, rec.errs)

	resps[2].Body.Close()
	resps[2].Body.Close()
	rec = recordingTB{}
	assert.False(t, httpretrytest.CheckDiscardedClosed(&rec, reqs))
	assert.False(t, httpretrytest.CheckBodiesClosed(&rec, reqs))
	assert.Equal(t, []string{
		"httpretrytest: returned response body of attempt 3 closed 2 time(s), want 0",
		"httpretrytest: response body of attempt 3 closed 2 time(s), want 1",
	}, rec.errs)
}
