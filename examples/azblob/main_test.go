package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A layout is one way of stacking the retry layers.
type layout struct {
	name                  string
	sdkRetries, httpretry bool
}

var (
	sdkOnly     = layout{"the SDK's retries only (its default)", true, false}
	bothLayers  = layout{"both layers on, httpretry's defaults", true, true}
	recommended = layout{"recommended: httpretry only, keys off", false, true}
)

// client returns a Blob client for the fake at url stacked as l says, with
// waits of at most 1 ms between retries in either layer (neither changes how
// many requests are sent). The recommended layout is newBlobClient over
// newBlobTransport, as main builds it.
func (l layout) client(t *testing.T, url string) *azblob.Client {
	t.Helper()
	if l == recommended {
		rt := newBlobTransport()
		rt.Policy.Backoff = backoff.Constant(0)
		c, err := newBlobClient(url, rt)
		require.NoError(t, err)
		return c
	}
	opts := azcore.ClientOptions{
		// azcore's defaults (MaxRetries 3: 4 tries), waits aside.
		Retry: policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond},
	}
	if l.httpretry {
		opts.Transport = &http.Client{Transport: &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}}
	}
	c, err := azblob.NewClientWithNoCredential(url, &azblob.ClientOptions{ClientOptions: opts})
	require.NoError(t, err)
	return c
}

// figures is what one layout did over a run of calls.
type figures struct {
	calls, ok, requests int
	first               int // requests of the first call
	blocks, duplicates  int // Append Block: blocks in the blob, and those that repeat an earlier one
	refused             int // Append Block: calls answered 412 AppendPositionConditionNotMet
}

func (f figures) String() string {
	s := fmt.Sprintf("%d/%d calls succeeded (%.1f %%), %.2f requests per call (%d for the first)",
		f.ok, f.calls, 100*float64(f.ok)/float64(f.calls), float64(f.requests)/float64(f.calls), f.first)
	if f.blocks > 0 {
		s += fmt.Sprintf(", %d blocks, %d duplicates, %d refused with 412", f.blocks, f.duplicates, f.refused)
	}
	return s
}

// run makes n calls of op through l against a fresh fake Blob service whose
// faults are set by fail, one after the other, so that a seed gives the same
// faults. An Append Block op appends to the append blob demo/log, which run
// creates first.
func run(t *testing.T, l layout, n int, fail func(*faults), op func(c *azblob.Client, i int) error) figures {
	t.Helper()
	srv, fake, fl := startFakeBlob(7)
	t.Cleanup(srv.Close)
	c := l.client(t, srv.URL)
	_, err := c.ServiceClient().NewContainerClient("demo").NewAppendBlobClient("log").Create(context.Background(), nil)
	require.NoError(t, err)
	start := fl.requests()
	fail(fl)
	f := figures{calls: n}
	for i := range n {
		err := op(c, i)
		if err == nil {
			f.ok++
		}
		if bloberror.HasCode(err, bloberror.AppendPositionConditionNotMet) {
			f.refused++
		}
		if i == 0 {
			f.first = fl.requests() - start
		}
	}
	f.requests = fl.requests() - start
	blocks := fake.appended("/demo/log")
	f.blocks, f.duplicates = len(blocks), duplicates(blocks)
	return f
}

func upload(c *azblob.Client, i int) error {
	_, err := c.UploadBuffer(context.Background(), "demo", fmt.Sprintf("obj-%d", i), []byte("hello"), nil)
	return err
}

func block(i int) []byte { return fmt.Appendf(nil, "block %03d\n", i) }

func appendNoCondition(c *azblob.Client, i int) error {
	return appendBlind(context.Background(), c.ServiceClient().NewContainerClient("demo").NewAppendBlobClient("log"), block(i))
}

// appendWithCondition appends block i at the end of the blocks before it:
// the faults here lose answers only, so every call's block was appended
// once its first request had reached the service.
func appendWithCondition(c *azblob.Client, i int) error {
	pos := int64(i * len(block(0)))
	return appendAt(context.Background(), c.ServiceClient().NewContainerClient("demo").NewAppendBlobClient("log"), pos, block(i))
}

// TestFigures measures the figures of docs/sdks.md:
//
//	cd examples/azblob && go test -run TestFigures -v
func TestFigures(t *testing.T) {
	t.Parallel()
	layouts := []layout{sdkOnly, bothLayers, recommended}

	t.Run("UploadBuffer, a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 200, func(f *faults) { f.set(0.10, 0.10) }, upload)
			t.Logf("10 %% 503, 10 %% answer lost: %-40s %v", l.name, got[l])
		}
		for _, l := range layouts {
			assert.GreaterOrEqual(t, got[l].ok, 198, "%s: at least 99 %% succeed: Put Blob is a PUT, retried whatever the failure", l.name)
		}
		assert.Equal(t, 200, got[bothLayers].ok, "4 tries of 4 attempts each")
	})

	t.Run("UploadBuffer, total outage", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 20, func(f *faults) { f.setOutage(true) }, upload)
			t.Logf("every request 503: %-40s %v", l.name, got[l])
		}
		r := got[recommended]
		assert.Zero(t, r.ok)
		assert.Equal(t, 4, r.first)
		assert.LessOrEqual(t, r.requests, 4*r.calls, "at most httpretry's MaxAttempts (4) per call")
		assert.Equal(t, 4, got[sdkOnly].first, "azcore alone: 4 tries (MaxRetries 3)")
		assert.Equal(t, 4*4, got[bothLayers].first, "the layers multiply: 4 azcore tries of 4 attempts each")
	})

	t.Run("Append Block, a tenth of answers lost", func(t *testing.T) {
		t.Parallel()
		lost := func(f *faults) { f.set(0, 0.10) }
		for _, l := range layouts {
			blind := run(t, l, 100, lost, appendNoCondition)
			t.Logf("10 %% answer lost, no condition:   %-40s %v", l.name, blind)
			cond := run(t, l, 100, lost, appendWithCondition)
			t.Logf("10 %% answer lost, AppendPosition: %-40s %v", l.name, cond)

			assert.Positive(t, blind.duplicates, "%s: a retried Append Block appends its block again", l.name)
			assert.Equal(t, 100+blind.duplicates, blind.blocks)
			assert.Zero(t, cond.duplicates, "%s: with the condition a repeat is refused, not appended", l.name)
			assert.Equal(t, 100, cond.blocks, "%s: every block once", l.name)
			assert.Positive(t, cond.refused, "%s: a repeat of an applied append gets 412", l.name)
			assert.Equal(t, cond.calls, cond.ok+cond.refused, "%s: a call fails only with the 412 of a repeat", l.name)
		}
	})
}

// TestAppendRepeat loses the answer of the first Append Block only, through
// the recommended client: httpretry sends the PUT again. Without the
// condition the block is appended twice and the call succeeds; with it the
// repeat is refused with 412 AppendPositionConditionNotMet and the block is
// there once. No request carries an Idempotency-Key.
func TestAppendRepeat(t *testing.T) {
	t.Parallel()
	for _, cond := range []bool{false, true} {
		fake := newFakeBlob()
		var mu sync.Mutex
		appends := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if r.URL.Query().Get("comp") == "appendblock" {
				appends++
			}
			first := appends == 1 && r.URL.Query().Get("comp") == "appendblock"
			mu.Unlock()
			if first {
				fake.ServeHTTP(httptest.NewRecorder(), r)
				dropAfterFirstByte(w)
				return
			}
			fake.ServeHTTP(w, r)
		}))
		rt := newBlobTransport()
		rt.Policy.Backoff = backoff.Constant(0)
		keys := 0
		rt.OnAttempt = func(a httpretry.Attempt) {
			if a.Request.Header.Get("Idempotency-Key") != "" {
				keys++
			}
		}
		c, err := newBlobClient(srv.URL, rt)
		require.NoError(t, err)
		ab := c.ServiceClient().NewContainerClient("demo").NewAppendBlobClient("log")
		_, err = ab.Create(context.Background(), nil)
		require.NoError(t, err)

		if cond {
			err = appendAt(context.Background(), ab, 0, []byte("once"))
			require.Error(t, err)
			assert.True(t, bloberror.HasCode(err, bloberror.AppendPositionConditionNotMet), "%v", err)
			assert.Equal(t, []string{"once"}, fake.appended("/demo/log"))
		} else {
			require.NoError(t, appendBlind(context.Background(), ab, []byte("once")))
			assert.Equal(t, []string{"once", "once"}, fake.appended("/demo/log"))
		}
		assert.Equal(t, 2, appends, "sent twice: httpretry retries a PUT whose answer was lost")
		assert.Zero(t, keys)
		srv.Close()
	}
}

// TestGetBlob reads back what UploadBuffer wrote, whole and from an offset.
func TestGetBlob(t *testing.T) {
	t.Parallel()
	srv, _, _ := startFakeBlob(7)
	t.Cleanup(srv.Close)
	c := recommended.client(t, srv.URL)
	ctx := context.Background()
	_, err := c.UploadBuffer(ctx, "demo", "greeting", []byte("hello, blob"), nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		rng  azblob.HTTPRange
		want string
	}{{azblob.HTTPRange{}, "hello, blob"}, {azblob.HTTPRange{Offset: 7}, "blob"}, {azblob.HTTPRange{Offset: 0, Count: 5}, "hello"}} {
		resp, err := c.DownloadStream(ctx, "demo", "greeting", &azblob.DownloadStreamOptions{Range: tc.rng})
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(b))
	}
	_, err = c.DownloadStream(ctx, "demo", "missing", nil)
	assert.True(t, bloberror.HasCode(err, bloberror.BlobNotFound), "%v", err)
}
