package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/go-resty/resty/v2"
	"github.com/hashicorp/go-retryablehttp"
)

// peer is another retry library, set up as its README does, with its
// waits cut to 1 ms so that a run takes seconds: it sends GETs to a URL.
type peer struct {
	name, setup string
	get         func(url string) error // nil when the call got a 200
	close       func()
}

// addressPeers are the peers for the address and connection tests, each
// over its own default transport (each dials with net.Dialer, in the
// resolver's order).
func addressPeers() []peer {
	rc := retryablehttp.NewClient() // RetryMax 4: 5 attempts
	rc.Logger = nil
	rc.RetryWaitMin, rc.RetryWaitMax = time.Millisecond, 2*time.Millisecond
	fsBase := http.DefaultTransport.(*http.Transport).Clone()
	fs := &http.Client{Transport: failsafehttp.NewRoundTripper(fsBase,
		failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Millisecond, 2*time.Millisecond).Build())} // 3 attempts
	rs := resty.New().SetLogger(quiet{}).SetRetryCount(3).SetRetryWaitTime(time.Millisecond).SetRetryMaxWaitTime(2 * time.Millisecond).
		AddRetryCondition(func(r *resty.Response, err error) bool { return err != nil || r.StatusCode() >= 500 })
	return []peer{
		{"go-retryablehttp v0.7.8", "NewClient: 5 attempts", func(url string) error { return status(rc.StandardClient().Get(url)) },
			rc.HTTPClient.CloseIdleConnections},
		{"failsafe-go v0.9.8", "failsafehttp retry policy: 3 attempts", func(url string) error { return status(fs.Get(url)) },
			fsBase.CloseIdleConnections},
		{"resty v2.17.2", "SetRetryCount(3): 4 attempts, retrying errors and 5xx", restyGet(rs), func() { rs.GetClient().CloseIdleConnections() }},
	}
}

// restyGet returns a peer's get through rs: nil for a 200.
func restyGet(rs *resty.Client) func(url string) error {
	return func(url string) error {
		r, err := rs.R().Get(url)
		if err != nil {
			return err
		}
		if r.StatusCode() != http.StatusOK {
			return fmt.Errorf("status %d", r.StatusCode())
		}
		return nil
	}
}

func status(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// quiet is a resty.Logger that logs nothing: resty logs every retry at
// Warn by default.
type quiet struct{}

func (quiet) Errorf(string, ...any) {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Debugf(string, ...any) {}

// downloadPeer is another retry library's client, set up as its README
// does, with its waits cut to 1 ms: get downloads url and hashes what it
// read.
type downloadPeer struct {
	name, setup string
	get         func(ctx context.Context, url string) fetched
}

// downloadPeers are the peers for the download tests, each over a
// transport of its own, closed when the test ends.
func downloadPeers(t interface{ Cleanup(func()) }) []downloadPeer {
	rc := retryablehttp.NewClient() // RetryMax 4: 5 attempts
	rc.Logger = nil
	rc.RetryWaitMin, rc.RetryWaitMax = time.Millisecond, 2*time.Millisecond
	t.Cleanup(rc.HTTPClient.CloseIdleConnections)
	fsBase := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(fsBase.CloseIdleConnections)
	fs := &http.Client{Transport: failsafehttp.NewRoundTripper(fsBase,
		failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Millisecond, 2*time.Millisecond).Build())} // 3 attempts
	rs := resty.New().SetLogger(quiet{}).SetRetryCount(3).SetRetryWaitTime(time.Millisecond).SetRetryMaxWaitTime(2 * time.Millisecond)
	t.Cleanup(func() { rs.GetClient().CloseIdleConnections() })
	return []downloadPeer{
		{"go-retryablehttp v0.7.8", "NewClient: 5 attempts", func(ctx context.Context, url string) fetched {
			return fetch(ctx, rc.StandardClient(), url)
		}},
		{"failsafe-go v0.9.8", "failsafehttp retry policy: 3 attempts", func(ctx context.Context, url string) fetched {
			return fetch(ctx, fs, url)
		}},
		{"resty v2.17.2", "SetRetryCount(3): 4 attempts; it reads every body into memory, and retries a read that fails", func(ctx context.Context, url string) fetched {
			start := time.Now()
			r, err := rs.R().SetContext(ctx).Get(url)
			f := fetched{err: err, n: int64(len(r.Body())), sum: sha256.Sum256(r.Body()), attempts: r.Request.Attempt}
			f.status, f.elapsed = r.StatusCode(), time.Since(start)
			return f
		}},
	}
}
