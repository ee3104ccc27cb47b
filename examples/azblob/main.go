// Azblob runs the Azure SDK's Blob Storage client (azblob, over azcore) over
// httpretry against a fake Blob service served on loopback, behind faults
// that fail a share of the requests, and prints what happened. It needs no
// network beyond 127.0.0.1.
//
//	cd examples/azblob && go run .
//
// azcore retries on its own (4 tries: MaxRetries 3); with httpretry under
// it as well, the two layers multiply. The recommended setup turns azcore's
// retries off (MaxRetries -1: 0 means the default), hands httpretry to
// azcore as an *http.Client, and turns Idempotency-Keys off: Azure Storage
// ignores them. Append Block is a PUT that is not idempotent, and httpretry
// retries PUTs: give it the append position condition, so that a repeat is
// refused with 412 instead of appended twice. docs/sdks.md has the figures.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/appendblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/seedhq/httpretry"
)

// newBlobClient returns a Blob Storage client for the service at serviceURL
// (anonymous: nothing is signed) whose requests go through rt, with azcore's
// own retries off.
func newBlobClient(serviceURL string, rt http.RoundTripper) (*azblob.Client, error) {
	return azblob.NewClientWithNoCredential(serviceURL, &azblob.ClientOptions{
		ClientOptions: azcore.ClientOptions{
			Transport: &http.Client{Transport: rt}, // a policy.Transporter: anything with Do
			// httpretry retries; -1 is one try and no retries (0 means
			// the default, 3).
			Retry: policy.RetryOptions{MaxRetries: -1},
		},
	})
}

// newBlobTransport returns the httpretry Transport for Blob Storage.
func newBlobTransport() *httpretry.Transport {
	return &httpretry.Transport{
		Policy: httpretry.Policy{
			// Azure Storage ignores Idempotency-Key: a key would make
			// httpretry retry a POST that may have been applied. PUT, GET,
			// DELETE are retried as usual, Append Block (a PUT) included:
			// give it the append position condition (appendAt).
			Keys: httpretry.KeyPolicy{Disabled: true},
		},
	}
}

// appendAt appends block to the append blob at pos, the blob's length: the
// service refuses it with 412 AppendPositionConditionNotMet if the blob is
// not that long, so a retry of an append whose answer was lost is refused
// instead of appended twice. The call then fails, though the block was
// appended; the caller tells by the blob's length.
func appendAt(ctx context.Context, c *appendblob.Client, pos int64, block []byte) error {
	_, err := c.AppendBlock(ctx, streaming.NopCloser(bytes.NewReader(block)), &appendblob.AppendBlockOptions{
		AppendPositionAccessConditions: &appendblob.AppendPositionAccessConditions{AppendPosition: &pos},
	})
	return err
}

// appendBlind appends block to the append blob with no condition, as
// AppendBlock does by default.
func appendBlind(ctx context.Context, c *appendblob.Client, block []byte) error {
	_, err := c.AppendBlock(ctx, streaming.NopCloser(bytes.NewReader(block)), nil)
	return err
}

// duplicates counts the blocks that repeat an earlier one.
func duplicates(blocks []string) int {
	seen, dup := map[string]bool{}, 0
	for _, b := range blocks {
		if seen[b] {
			dup++
		}
		seen[b] = true
	}
	return dup
}

// startFakeBlob serves the fake Blob service behind faults.
func startFakeBlob(seed uint64) (*httptest.Server, *fakeBlob, *faults) {
	fake := newFakeBlob()
	fl := newFaults(fake, seed)
	return httptest.NewServer(fl), fake, fl
}

func main() {
	srv, fake, fl := startFakeBlob(1)
	defer srv.Close()
	ctx := context.Background()
	rt := newBlobTransport()
	rt.OnAttempt = func(a httpretry.Attempt) {
		if a.Retry || a.N > 1 {
			outcome := "?"
			if a.Err != nil {
				outcome = a.Err.Error()
			} else {
				outcome = a.Response.Status
			}
			fmt.Printf("   attempt %d %s %s?%s -> %s, %s\n", a.N, a.Request.Method, a.Request.URL.Path, a.Request.URL.RawQuery, outcome, a.Stop)
		}
	}
	c, err := newBlobClient(srv.URL, rt)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println("1. 20 UploadBuffer calls while 10 % of requests get 503 and 10 % lose their answer")
	fl.set(0.10, 0.10)
	ok := 0
	for i := range 20 {
		if _, err := c.UploadBuffer(ctx, "demo", fmt.Sprintf("obj-%d", i), []byte("hello"), nil); err == nil {
			ok++
		}
	}
	fmt.Printf("   => %d of 20 succeeded (Put Blob is a PUT: retried whatever the failure)\n", ok)
	fl.set(0, 0)
	got, err := c.DownloadStream(ctx, "demo", "obj-0", nil)
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(got.Body)
	_ = got.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("   Get Blob demo/obj-0: %q\n", body)

	fmt.Println("\n2. 20 Append Blocks while 10 % of answers are lost, without the append position condition, then with it")
	for _, cond := range []bool{false, true} {
		name := fmt.Sprintf("log-%t", cond)
		ab := c.ServiceClient().NewContainerClient("demo").NewAppendBlobClient(name)
		if _, err := ab.Create(ctx, nil); err != nil {
			log.Fatal(err)
		}
		fl.set(0, 0.10)
		refused := 0
		var pos int64
		for i := range 20 {
			block := fmt.Appendf(nil, "block %02d\n", i)
			if !cond {
				_ = appendBlind(ctx, ab, block)
				continue
			}
			if err := appendAt(ctx, ab, pos, block); bloberror.HasCode(err, bloberror.AppendPositionConditionNotMet) {
				refused++ // a retry of an append that was applied
			}
			pos += int64(len(block)) // every block is applied here: faults lose answers only
		}
		fl.set(0, 0)
		blocks := fake.appended("/demo/" + name)
		fmt.Printf("   => condition %-5t: %d blocks appended for 20 calls, %d duplicates, %d repeats refused with 412\n",
			cond, len(blocks), duplicates(blocks), refused)
	}

	fmt.Println("\n3. UploadBuffer in a total outage")
	fl.setOutage(true)
	before := fl.requests()
	_, err = c.UploadBuffer(ctx, "demo", "x", []byte("x"), nil)
	fmt.Printf("   => %d requests for one call (with azcore's 4 tries on as well: up to 16)\n   => %v\n", fl.requests()-before, err)
}
