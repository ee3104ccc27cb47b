// S3 runs aws-sdk-go-v2's S3 client over httpretry against gofakes3, a fake
// S3 served on loopback, behind faults that fail a share of the requests,
// and prints what happened. It needs no network beyond 127.0.0.1.
//
//	cd examples/s3 && go run .
//
// The SDK retries on its own (3 attempts, with a retry quota); with
// httpretry under it as well, the two layers multiply. The recommended
// setup turns the SDK's retries off (aws.NopRetryer), gives httpretry the
// SDK's own http.Transport as Base, and turns Idempotency-Keys off: S3
// ignores them, so a keyed POST (CreateMultipartUpload,
// CompleteMultipartUpload) is not safe to send twice. docs/sdks.md has the
// figures.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/seedhq/httpretry"
)

// newS3Client returns an S3 client for the endpoint whose requests go
// through rt, with the SDK's own retries off.
func newS3Client(endpoint string, rt http.RoundTripper, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-real-secret", ""),
		// httpretry retries; NopRetryer makes one attempt per call and
		// spends no retry quota.
		Retryer: aws.NopRetryer{},
		HTTPClient: &http.Client{
			Transport: rt,
			// As the SDK's own client: a 3xx (a region redirect) goes back
			// to the SDK, which knows what to do with it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, optFns...)
}

// newS3Transport returns the httpretry Transport for S3.
func newS3Transport() *httpretry.Transport {
	return &httpretry.Transport{
		// The SDK's own pool (MaxIdleConnsPerHost 10, its dial and TLS
		// timeouts) rather than go-cleanhttp's, which opened more
		// connections to S3 under load.
		Base: awshttp.NewBuildableClient().GetTransport(),
		Policy: httpretry.Policy{
			// S3 ignores Idempotency-Key: a key would make httpretry
			// retry a POST that may have been applied. Off, a POST is
			// retried only when it provably never reached S3; PUT, GET,
			// DELETE are retried as usual.
			Keys: httpretry.KeyPolicy{Disabled: true},
			// S3 answers 503 (SlowDown) to refuse a request it did not
			// process, so even a POST may be sent again after one.
			Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
				if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
					return httpretry.ClassNotProcessed
				}
				return httpretry.ClassDefault
			},
		},
	}
}

// multipartUpload uploads body as key in one part, as a large upload would
// in many.
func multipartUpload(ctx context.Context, c *s3.Client, bucket, key, body string) error {
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	part, err := c.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader(body),
	})
	if err != nil {
		return fmt.Errorf("upload part: %w", err)
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}},
	})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	return nil
}

// noSuchUpload reports whether err is S3's NoSuchUpload, which the SDK
// models as a type for some operations only (not CompleteMultipartUpload).
func noSuchUpload(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchUpload"
}

// startFakeS3 serves gofakes3, with the bucket "demo", behind faults.
func startFakeS3(seed uint64) (*httptest.Server, *faults) {
	fl := newFakeS3(seed)
	return httptest.NewServer(fl), fl
}

// newFakeS3 returns gofakes3, with the bucket "demo", behind faults.
func newFakeS3(seed uint64) *faults {
	backend := s3mem.New()
	if err := backend.CreateBucket("demo"); err != nil {
		log.Fatal(err)
	}
	return newFaults(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server(), seed)
}

func main() {
	srv, fl := startFakeS3(1)
	defer srv.Close()
	ctx := context.Background()
	rt := newS3Transport()
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
	c := newS3Client(srv.URL, rt)

	fmt.Println("1. 20 PutObject calls while 10 % of requests get 503 and 10 % lose their answer")
	fl.set(0.10, 0.10)
	ok := 0
	for i := range 20 {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("demo"), Key: aws.String(fmt.Sprintf("obj-%d", i)), Body: strings.NewReader("hello"),
		}); err == nil {
			ok++
		}
	}
	fmt.Printf("   => %d of 20 succeeded (PUT is idempotent: retried whatever the failure)\n", ok)

	fmt.Println("\n2. 20 multipart uploads under the same faults: a POST whose answer is lost")
	fmt.Println("   is not retried, since S3 would not recognise the repeat")
	failed := 0
	for i := range 20 {
		if err := multipartUpload(ctx, c, "demo", fmt.Sprintf("big-%d", i), "part one"); err != nil {
			failed++
			if noSuchUpload(err) {
				fmt.Println("   NoSuchUpload: a retried Complete of an upload S3 had completed")
			}
		}
	}
	fl.set(0, 0)
	left, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("demo")})
	if err != nil && !noSuchUpload(err) { // gofakes3's answer for a bucket that never had an upload
		log.Fatal(err)
	}
	fmt.Printf("   => %d of 20 failed; %d uploads left open (a lifecycle rule's AbortIncompleteMultipartUpload cleans them up)\n",
		failed, len(left.Uploads))

	fmt.Println("\n3. PutObject in a total outage")
	fl.setOutage(true)
	before := fl.requests()
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("demo"), Key: aws.String("x"), Body: strings.NewReader("x")})
	fmt.Printf("   => %d requests for one call (with the SDK's 3 attempts on as well: up to 12)\n   => %v\n", fl.requests()-before, err)
}
