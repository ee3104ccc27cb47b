package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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

// client returns an S3 client for the fake at url stacked as l says, with
// waits of at most 1 ms between retries in either layer (neither changes how
// many requests are sent). The recommended layout is newS3Client over
// newS3Transport, as main builds it.
func (l layout) client(url string) *s3.Client {
	if l == recommended {
		rt := newS3Transport()
		rt.Policy.Backoff = backoff.Constant(0)
		return newS3Client(url, rt)
	}
	var hc aws.HTTPClient = awshttp.NewBuildableClient()
	if l.httpretry {
		hc = &http.Client{
			Transport: &httpretry.Transport{
				Base:   awshttp.NewBuildableClient().GetTransport(),
				Policy: httpretry.Policy{Backoff: backoff.Constant(0)},
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return newS3Client(url, nil, func(o *s3.Options) {
		o.HTTPClient = hc
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), time.Millisecond)
	})
}

// figures is what one layout did over a run of calls.
type figures struct {
	calls, ok, requests int
	first               int // requests of the first call
	noSuchUpload        int // Complete answered NoSuchUpload for an upload S3 had completed
	orphans             int // uploads left open
}

func (f figures) String() string {
	return fmt.Sprintf("%d/%d calls succeeded (%.1f %%), %.2f requests per call (%d for the first), %d NoSuchUpload, %d uploads left open",
		f.ok, f.calls, 100*float64(f.ok)/float64(f.calls), float64(f.requests)/float64(f.calls), f.first, f.noSuchUpload, f.orphans)
}

// run makes n calls of op through l against a fresh fake S3 whose faults
// are set by fail, one after the other, so that a seed gives the same faults.
func run(t *testing.T, l layout, n int, fail func(*faults), op func(c *s3.Client, i int) error) figures {
	t.Helper()
	srv, fl := startFakeS3(7)
	t.Cleanup(srv.Close)
	c := l.client(srv.URL)
	fail(fl)
	f := figures{calls: n}
	for i := range n {
		err := op(c, i)
		if err == nil {
			f.ok++
		}
		if noSuchUpload(err) {
			f.noSuchUpload++
		}
		if i == 0 {
			f.first = fl.requests()
		}
	}
	f.requests = fl.requests()
	fl.set(0, 0)
	left, err := c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String("demo")})
	if !noSuchUpload(err) { // gofakes3's answer for a bucket that never had an upload
		require.NoError(t, err)
		f.orphans = len(left.Uploads)
	}
	return f
}

func putObject(c *s3.Client, i int) error {
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("demo"), Key: aws.String(fmt.Sprintf("obj-%d", i)), Body: strings.NewReader("hello"),
	})
	return err
}

func upload(c *s3.Client, i int) error {
	return multipartUpload(context.Background(), c, "demo", fmt.Sprintf("big-%d", i), "part one")
}

// TestFigures measures the figures of docs/sdks.md:
//
//	cd examples/s3 && go test -run TestFigures -v
func TestFigures(t *testing.T) {
	t.Parallel()
	layouts := []layout{sdkOnly, bothLayers, recommended}
	fifth := func(f *faults) { f.set(0.10, 0.10) }

	t.Run("PutObject, a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		for _, l := range layouts {
			got := run(t, l, 200, fifth, putObject)
			t.Logf("10 %% 503, 10 %% answer lost: %-40s %v", l.name, got)
			if l == recommended {
				assert.GreaterOrEqual(t, got.ok, 198, "at least 99 %% succeed: PUT is retried whatever the failure")
			}
		}
	})

	t.Run("multipart upload, a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 100, fifth, upload)
			t.Logf("10 %% 503, 10 %% answer lost: %-40s %v", l.name, got[l])
		}
		r := got[recommended]
		assert.Zero(t, r.noSuchUpload, "a Complete whose answer was lost is not sent again")
		assert.Positive(t, got[bothLayers].noSuchUpload, "a keyed Complete is retried, and S3 ignores the key")
		assert.LessOrEqual(t, r.orphans, got[bothLayers].orphans)
	})

	t.Run("PutObject, total outage", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 20, func(f *faults) { f.setOutage(true) }, putObject)
			t.Logf("every request 503: %-40s %v", l.name, got[l])
		}
		r := got[recommended]
		assert.Zero(t, r.ok)
		assert.LessOrEqual(t, r.requests, 4*r.calls, "at most httpretry's MaxAttempts (4) per call")
		assert.Equal(t, 3, got[sdkOnly].first, "the SDK alone: 3 attempts")
		assert.Equal(t, 3*4, got[bothLayers].first, "the layers multiply: 3 SDK attempts of 4 each")
	})
}

// TestNoKeyToS3: with keys off, no request carries an Idempotency-Key, and
// a CreateMultipartUpload whose answer is lost is sent once.
func TestNoKeyToS3(t *testing.T) {
	t.Parallel()
	srv, fl := startFakeS3(7)
	t.Cleanup(srv.Close)
	var keys, creates int
	rt := newS3Transport()
	rt.Policy.Backoff = backoff.Constant(0)
	rt.OnAttempt = func(a httpretry.Attempt) {
		if a.Request.Header.Get("Idempotency-Key") != "" {
			keys++
		}
		if a.Request.URL.Query().Has("uploads") {
			creates++
		}
	}
	c := newS3Client(srv.URL, rt)
	fl.set(0, 1) // every answer lost
	_, err := c.CreateMultipartUpload(context.Background(), &s3.CreateMultipartUploadInput{Bucket: aws.String("demo"), Key: aws.String("k")})
	require.Error(t, err)
	assert.Equal(t, 1, creates, "sent once: S3 would not recognise a repeat")
	assert.Zero(t, keys)
}

// TestConnectionsOpened counts the connections the fake S3 accepts over 5
// bursts of 16 PutObjects at once (the server holds each burst until all 16
// have arrived, so that 16 connections are in use, then idle): through
// httpretry over the SDK's own transport, as newS3Transport sets it, and
// over httpretry's default Base, go-cleanhttp's pooled transport. After a
// burst the SDK's pool keeps 10 idle connections per host, go-cleanhttp's
// GOMAXPROCS+1, so each later burst dials the rest again:
//
//	cd examples/s3 && go test -run TestConnectionsOpened -v
func TestConnectionsOpened(t *testing.T) {
	t.Parallel()
	const burst, bursts = 16, 5
	bases := []struct {
		name string
		base func() http.RoundTripper
	}{
		{"the SDK's transport as Base (newS3Transport)", func() http.RoundTripper { return newS3Transport().Base }},
		{"httpretry's default Base (go-cleanhttp)", func() http.RoundTripper { return nil }},
	}
	opened := make([]int64, len(bases))
	for i, b := range bases {
		var conns atomic.Int64
		fake := newFakeS3(7)
		var mu sync.Mutex
		gate, arrived := make(chan struct{}), 0
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			g := gate
			if arrived++; arrived == burst {
				close(gate)
				gate, arrived = make(chan struct{}), 0
			}
			mu.Unlock()
			select {
			case <-g:
			case <-time.After(10 * time.Second):
			}
			fake.ServeHTTP(w, r)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		rt := newS3Transport()
		rt.Base = b.base()
		c := newS3Client(srv.URL, rt)
		var failed atomic.Int64
		for round := range bursts {
			var wg sync.WaitGroup
			for j := range burst {
				wg.Go(func() {
					if putObject(c, round*burst+j) != nil {
						failed.Add(1)
					}
				})
			}
			wg.Wait()
		}
		srv.Close()
		require.Zero(t, failed.Load(), "%s: every PutObject succeeds", b.name)
		opened[i] = conns.Load()
		t.Logf("%d bursts of %d PutObjects: %-45s %d connections opened", bursts, burst, b.name, opened[i])
	}
	// The SDK's pool: 16, then 6 a burst (a connection that comes back to
	// the pool late makes one more).
	assert.LessOrEqual(t, opened[0], int64(burst+(bursts-1)*(burst-10)+8), "the SDK's pool keeps 10 idle connections")
	if idle := runtime.GOMAXPROCS(0) + 1; idle < 10 {
		assert.Greater(t, opened[1], opened[0], "go-cleanhttp's pool keeps %d idle connections, fewer than the SDK's 10", idle)
	}
}
