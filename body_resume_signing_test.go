package httpretry_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// sharedKeyBase is a fake Azure Storage: a request carries
// "Authorization: <scheme> acct:<signature>", a signature over its method,
// path and Range header, as Azure's Shared Key covers Range; one whose
// signature does not cover what it carries is answered 403
// AuthenticationFailed. Its first answer breaks after cut bytes.
type sharedKeyBase struct {
	content string
	cut     int

	mu   sync.Mutex
	seen []string // each request's Range
}

func sharedKeySign(scheme string, req *http.Request) string {
	m := hmac.New(sha256.New, []byte("account key"))
	io.WriteString(m, req.Method+"\n"+req.URL.Path+"\n"+req.Header.Get("Range"))
	return scheme + " acct:" + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func (b *sharedKeyBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.seen = append(b.seen, req.Header.Get("Range"))
	n := len(b.seen)
	b.mu.Unlock()
	auth := req.Header.Get("Authorization")
	scheme, _, _ := strings.Cut(auth, " ")
	if auth != sharedKeySign(scheme, req) {
		return &http.Response{StatusCode: http.StatusForbidden, Request: req, Body: http.NoBody,
			Header: http.Header{"X-Ms-Error-Code": {"AuthenticationFailed"}}}, nil
	}
	body := httpretrytest.NewBody(b.content)
	if n == 1 {
		body.FailAfter(int64(b.cut), nil)
	}
	return &http.Response{StatusCode: http.StatusOK, Request: req, Body: body, ContentLength: int64(len(b.content)),
		Header: http.Header{"Etag": {`"v1"`}}}, nil
}

// A request signed above the Transport with a scheme whose signature
// covers Range (Azure Storage's SharedKey and SharedKeyLite) is not
// resumed: the resume's Range would be refused 403 (5 in 300 operations
// against Azurite), a wasted request. The caller gets the cut, as without
// httpretry, and the SDK's own retry reader can take it from there.
func TestResumeNotSentWhenTheSignatureCoversRange(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{"SharedKey", "SharedKeyLite", "sharedkey"} {
		synctest.Test(t, func(t *testing.T) {
			base := &sharedKeyBase{content: strings.Repeat("0123456789", 1000), cut: 4000}
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://acct.blob.core.windows.net/c/blob", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", sharedKeySign(scheme, req))
			resp, err := (&httpretry.Transport{Base: base}).RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			assert.Len(t, got, 4000, scheme)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF, scheme)
			var re *httpretry.ResumeError
			assert.NotErrorAs(t, err, &re, "%s: a resume was tried", scheme)
			base.mu.Lock()
			defer base.mu.Unlock()
			assert.Equal(t, []string{""}, base.seen, "%s: no resume is sent", scheme)
		})
	}
	// SigV4 covers only the headers it names (aws-sdk-go-v2 names no
	// Range on a request without one); a scheme that signs no header (a
	// bearer token) is resumed.
	for _, c := range []struct {
		auth     string
		requests int // 1: not resumed; 3: two resumes
	}{
		{"Bearer token", 3},
		{"AWS4-HMAC-SHA256 Credential=AKID/20261207/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=abc", 3},
	} {
		synctest.Test(t, func(t *testing.T) {
			base := &rangeBase{content: strings.Repeat("0123456789", 1000), cut: 4000}
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, site, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", c.auth)
			resp, err := (&httpretry.Transport{Base: base}).RoundTrip(req)
			require.NoError(t, err)
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Len(t, base.requests(), c.requests, c.auth)
			if c.requests == 1 {
				assert.ErrorIs(t, err, io.ErrUnexpectedEOF, c.auth)
			} else {
				assert.NoError(t, err, c.auth)
			}
		})
	}
}

// A host that refused a resume 401 or 403 (a signature, a token or a
// policy that does not allow the Range) is not resumed for a minute: its
// next cut bodies reach the caller as cut, with no wasted request each,
// and after the minute a resume is tried again.
func TestResumeRefusedHostIsNotResumedForAWhile(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ranges []string
		base := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			ranges = append(ranges, req.Header.Get("Range"))
			mu.Unlock()
			if req.Header.Get("Range") != "" {
				return &http.Response{StatusCode: http.StatusForbidden, Request: req, Body: http.NoBody, Header: http.Header{}}, nil
			}
			body := httpretrytest.NewBody(strings.Repeat("0123456789", 1000))
			body.FailAfter(4000, nil)
			return &http.Response{StatusCode: http.StatusOK, Request: req, Body: body, ContentLength: 10000,
				Header: http.Header{"Etag": {`"v1"`}}}, nil
		})
		tr := &httpretry.Transport{Base: base}
		download := func() error {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, site, nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			return err
		}
		sent := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(ranges)
		}
		var re *httpretry.ResumeError
		err := download()
		require.ErrorAs(t, err, &re)
		assert.Equal(t, http.StatusForbidden, re.Status)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the refused resume ends with the cut")
		assert.Equal(t, []string{"", "bytes=4000-"}, sent())

		time.Sleep(30 * time.Second)
		err = download()
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.NotErrorAs(t, err, &re, "a resume was tried within the minute")
		assert.Equal(t, []string{"", "bytes=4000-", ""}, sent())

		time.Sleep(31 * time.Second)
		require.ErrorAs(t, download(), &re)
		assert.Equal(t, []string{"", "bytes=4000-", "", "", "bytes=4000-"}, sent(), "resumed again after the minute")
	})
}
