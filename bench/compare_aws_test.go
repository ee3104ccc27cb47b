package bench

// The AWS SDK for Go v2's retry package (github.com/aws/aws-sdk-go-v2
// v1.48.0, aws/retry; smithy-go v1.28.9) next to httpretry. Two kinds of
// test: the retryer's parts driven directly (retry.NewStandard: attempts,
// backoff, retry quota, classification), and whole operations sent through
// the SDK's own middleware stack to loopback servers (awsOp below).
//
// v1.48.0 made "Retry Behavior 2.1" the default (its CHANGELOG, 2026-11-10):
// a retry costs 14 tokens (5 after a throttling error), the backoff base is
// 50 ms (1 s after a throttling error) and the 20 s cap is applied before
// the jitter. Earlier releases, and the AWS SDKs and Tools reference guide's
// description of standard mode, have cost 5, timeout cost 10 and
// rand·2^attempt seconds, exactly 20 s once capped; that formula is still
// exported as NewExponentialJitterBackoff and is measured here too.
// docs/comparison-tests.md records the difference.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// awsOp sends one operation through the layers of an AWS SDK client that
// take part in retrying: smithy-go's middleware stack; the SDK's retry
// middleware, installed as retry.AddRetryMiddlewares installs it
// (NewAttemptMiddleware with smithyhttp.RequestCloner, in the finalize
// step); the SDK's Amz-Sdk-Invocation-Id middleware and ResponseErrorWrapper;
// and smithy-go's HTTP ClientHandler over client. Only the operation
// deserializer is a stand-in, as generated clients have one per service:
// like theirs, it turns an error status into a *smithy.GenericAPIError (the
// code taken from X-Amzn-ErrorType, as the REST-JSON protocol does) and
// drains and closes the body with smithyhttp.CloseResponseBody.
type awsOp struct {
	retryer aws.Retryer
	client  *http.Client
	method  string
	url     string
	body    string
	handed  *smithyhttp.Request // the request the retry middleware was handed
}

func (o *awsOp) do(ctx context.Context) error {
	stack := middleware.NewStack("Op", smithyhttp.NewStackRequest)
	stack.Serialize.Add(middleware.SerializeMiddlewareFunc("Serialize", func(ctx context.Context, in middleware.SerializeInput, next middleware.SerializeHandler) (middleware.SerializeOutput, middleware.Metadata, error) {
		req := in.Request.(*smithyhttp.Request)
		u, err := url.Parse(o.url)
		if err != nil {
			return middleware.SerializeOutput{}, middleware.Metadata{}, err
		}
		req.URL, req.Method = u, o.method
		if o.body != "" {
			if req, err = req.SetStream(strings.NewReader(o.body)); err != nil {
				return middleware.SerializeOutput{}, middleware.Metadata{}, err
			}
			in.Request = req
		}
		return next.HandleSerialize(ctx, in)
	}), middleware.After)
	stack.Build.Add(&awsmiddleware.ClientRequestID{}, middleware.After)
	stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("Observe", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		o.handed = in.Request.(*smithyhttp.Request)
		return next.HandleFinalize(ctx, in)
	}), middleware.After)
	stack.Finalize.Add(retry.NewAttemptMiddleware(o.retryer, smithyhttp.RequestCloner), middleware.After)
	stack.Deserialize.Add(&awshttp.ResponseErrorWrapper{}, middleware.After)
	stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("OperationDeserializer", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		resp := out.RawResponse.(*smithyhttp.Response)
		if resp.StatusCode < 300 {
			smithyhttp.CloseResponseBody(ctx, resp, false, nil)
			return out, md, nil
		}
		apiErr := &smithy.GenericAPIError{Code: resp.Header.Get("X-Amzn-ErrorType"), Message: resp.Status}
		smithyhttp.CloseResponseBody(ctx, resp, false, apiErr)
		return out, md, apiErr
	}), middleware.After)
	h := middleware.DecorateHandler(smithyhttp.NewClientHandlerWithOptions(o.client), stack)
	_, _, err := h.Handle(ctx, struct{}{})
	return err
}

// awsRetryer is the SDK's standard retryer with waits of zero, so that
// nothing sleeps; everything else is the default.
func awsRetryer() *retry.Standard {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
}

// recorder is a loopback server answering with statuses in turn (the last
// repeats), recording each request's headers, body and arrival time.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	header   http.Header // added to every answer
	reqs     []recorded
}

type recorded struct {
	header http.Header
	body   string
	at     time.Time
}

func newRecorder(t *testing.T, statuses ...int) *recorder {
	r := &recorder{statuses: statuses, header: http.Header{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := r.statuses[min(len(r.reqs), len(r.statuses)-1)]
		r.reqs = append(r.reqs, recorded{req.Header.Clone(), string(b), time.Now()})
		for k, v := range r.header {
			w.Header()[k] = v
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, strings.Repeat("error detail ", 100))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) received() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// TestCompareAWSDefaultAttempts: the standard retryer makes 3 attempts
// (retry.DefaultMaxAttempts); httpretry's default policy makes 4.
func TestCompareAWSDefaultAttempts(t *testing.T) {
	t.Run("aws-sdk", func(t *testing.T) {
		assert.Equal(t, 3, retry.NewStandard().MaxAttempts())
		srv := newRecorder(t, 503)
		err := (&awsOp{retryer: awsRetryer(), client: &http.Client{Transport: newBare()}, method: http.MethodGet, url: srv.URL}).do(context.Background())
		var me *retry.MaxAttemptsError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, 3, me.Attempt)
		assert.Len(t, srv.received(), 3)
	})
	t.Run("httpretry", func(t *testing.T) {
		srv := newRecorder(t, 503)
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := newHTTPRetry(newBare(), 0).RoundTrip(req)
		require.NoError(t, err)
		closeResp(resp)
		assert.Len(t, srv.received(), 4)
	})
}

// spread summarises many draws of one backoff delay.
type spread struct {
	min, max time.Duration
	atMax    int // draws equal to max
	n        int
}

func draw(n int, delay func() time.Duration) spread {
	s := spread{min: time.Duration(1<<63 - 1), n: n}
	for range n {
		d := delay()
		switch {
		case d > s.max:
			s.max, s.atMax = d, 1
		case d == s.max:
			s.atMax++
		}
		s.min = min(s.min, d)
	}
	return s
}

// backoffDraws is the number of draws per retry: with 2000 uniform draws
// the chance that none lands in the top (or bottom) 1 % of the range is
// 0.99^2000 ≈ 2·10⁻⁹.
const backoffDraws = 2000

// TestCompareAWSBackoff measures the delays for retries 1 to 10 (the SDK's
// attempt argument is the number of the attempt that failed, so attempt n
// precedes retry n, as httpretry's n does).
//
// SDK default (v1.48.0): uniform in [0, min(50 ms·2^(n−1), 20 s)), 1 s
// instead of 50 ms after a throttling error: the cap is a hard ceiling and
// the draw stays jittered at it. The legacy formula of earlier releases
// (NewExponentialJitterBackoff): uniform in [0, 2^n s) for n ≤ 4,
// then exactly 20 s every time, without jitter. httpretry: uniform in
// [0, min(100 ms·2^(n−1), 3 s)], jittered at the cap, never above it.
func TestCompareAWSBackoff(t *testing.T) {
	const maxBackoff = 20 * time.Second
	ceiling := func(base time.Duration, n int, limit time.Duration) time.Duration {
		return min(base<<(n-1), limit)
	}
	jittered := func(t *testing.T, n int, s spread, ceil time.Duration) {
		t.Helper()
		assert.GreaterOrEqual(t, s.min, time.Duration(0), "retry %d", n)
		assert.Less(t, s.min, ceil/100, "retry %d: draws reach the bottom of the range", n)
		assert.LessOrEqual(t, s.max, ceil, "retry %d: never above the ceiling", n)
		assert.Greater(t, s.max, ceil*99/100, "retry %d: draws reach the ceiling", n)
		assert.Less(t, s.atMax, s.n/10, "retry %d: no pile-up on one value", n)
	}
	t.Run("aws-sdk", func(t *testing.T) {
		s := retry.NewStandard()
		errs := map[string]struct {
			err  error
			base time.Duration
		}{
			"transient":  {awsResponseError(503, ""), 50 * time.Millisecond},
			"throttling": {awsResponseError(400, "ThrottlingException"), time.Second},
		}
		for name, e := range errs {
			for n := 1; n <= 10; n++ {
				sp := draw(backoffDraws, func() time.Duration {
					d, err := s.RetryDelay(n, e.err)
					require.NoError(t, err)
					return d
				})
				ceil := ceiling(e.base, n, maxBackoff)
				t.Logf("%s retry %2d: ceiling %-6v min %-12v max %v", name, n, ceil, sp.min, sp.max)
				jittered(t, n, sp, ceil)
				assert.Less(t, sp.max, maxBackoff, "retry %d: below the cap, never above", n)
			}
		}
	})
	t.Run("aws-sdk-legacy", func(t *testing.T) {
		b := retry.NewExponentialJitterBackoff(maxBackoff)
		for n := 1; n <= 10; n++ {
			sp := draw(backoffDraws, func() time.Duration {
				d, err := b.BackoffDelay(n, nil)
				require.NoError(t, err)
				return d
			})
			t.Logf("retry %2d: min %-12v max %v (%d of %d draws at max)", n, sp.min, sp.max, sp.atMax, sp.n)
			if n <= 4 {
				jittered(t, n, sp, time.Second<<n)
				continue
			}
			assert.Equal(t, spread{min: maxBackoff, max: maxBackoff, atMax: sp.n, n: sp.n}, sp,
				"retry %d: exactly the cap on every draw, no jitter", n)
		}
	})
	t.Run("httpretry", func(t *testing.T) {
		b := backoff.Default()
		for n := 1; n <= 10; n++ {
			sp := draw(backoffDraws, func() time.Duration { return b.Delay(n, 0, nil) })
			ceil := ceiling(100*time.Millisecond, n, 3*time.Second)
			t.Logf("retry %2d: ceiling %-6v min %-12v max %v", n, ceil, sp.min, sp.max)
			jittered(t, n, sp, ceil)
		}
	})
}

// awsResponseError is the error an AWS SDK operation fails with when the
// service answers status: the deserializer's *smithy.GenericAPIError
// (code "" for an unmodelled error) wrapped as the ResponseErrorWrapper
// wraps it.
func awsResponseError(status int, code string) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody}},
		Err:      &smithy.GenericAPIError{Code: code, Message: http.StatusText(status)},
	}}
}

// TestCompareAWSRetryQuota drains a fresh retry quota. SDK (v1.48.0): 500
// tokens, 14 per retry, so 35 retries and then a QuotaExceededError with 10
// tokens left; 5 per retry after a throttling error (100 retries); a retry
// after a timeout costs 14 like any other, not 10. A retry that succeeds
// gets its 14 back; an operation that succeeds on its first attempt adds 1.
// httpretry's default token bucket: 500 tokens, 5 per retry (100 retries),
// 10 after an attempt timeout (50); the same refund and credit.
func TestCompareAWSRetryQuota(t *testing.T) {
	ctx := context.Background()
	drain := func(s *retry.Standard, opErr error) (n int, err error) {
		for {
			if _, err := s.GetRetryToken(ctx, opErr); err != nil {
				return n, err
			}
			n++
		}
	}
	t.Run("aws-sdk", func(t *testing.T) {
		var quota *ratelimit.TokenRateLimit
		s := retry.NewStandard(func(o *retry.StandardOptions) { quota = o.RateLimiter.(*ratelimit.TokenRateLimit) })
		require.Equal(t, uint(500), quota.Remaining())

		release, err := s.GetRetryToken(ctx, awsResponseError(503, ""))
		require.NoError(t, err)
		assert.Equal(t, uint(486), quota.Remaining(), "a retry costs 14")
		require.NoError(t, release(nil))
		assert.Equal(t, uint(500), quota.Remaining(), "a successful retry gets its cost back")

		n, err := drain(s, awsResponseError(503, ""))
		assert.Equal(t, 35, n)
		var qe ratelimit.QuotaExceededError
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, ratelimit.QuotaExceededError{Available: 10, Requested: 14}, qe)

		for range 4 { // four operations that succeed on their first attempt
			first, err := s.GetAttemptToken(ctx)
			require.NoError(t, err)
			require.NoError(t, first(nil))
		}
		assert.Equal(t, uint(14), quota.Remaining(), "+1 per first-attempt success")
		failed, err := s.GetAttemptToken(ctx)
		require.NoError(t, err)
		require.NoError(t, failed(errors.New("attempt failed")))
		assert.Equal(t, uint(14), quota.Remaining(), "a failed attempt adds nothing")
		n, _ = drain(s, awsResponseError(503, ""))
		assert.Equal(t, 1, n)

		n, _ = drain(retry.NewStandard(), awsResponseError(400, "ThrottlingException"))
		assert.Equal(t, 100, n, "5 per retry after a throttling error")
		n, _ = drain(retry.NewStandard(), awsResponseError(429, ""))
		assert.Equal(t, 100, n, "an unmodelled 429 is a throttling error")
		n, _ = drain(retry.NewStandard(), os.ErrDeadlineExceeded)
		assert.Equal(t, 35, n, "a timeout costs 14 like any retry, not 10")
	})
	t.Run("httpretry", func(t *testing.T) {
		b := httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})
		tokens := func(b httpretry.Budget) int {
			available, _ := b.(interface{ Level() (float64, float64) }).Level()
			return int(available)
		}
		require.Equal(t, 500, tokens(b))
		require.True(t, b.AllowRetry(false))
		assert.Equal(t, 495, tokens(b), "a retry costs 5")
		b.Succeeded(true, false)
		assert.Equal(t, 500, tokens(b), "a successful retry gets its cost back")

		n := 0
		for b.AllowRetry(false) {
			n++
		}
		assert.Equal(t, 100, n)
		assert.Zero(t, tokens(b))
		for range 5 {
			b.Succeeded(false, false)
		}
		assert.Equal(t, 5, tokens(b), "+1 per success without retries")
		assert.True(t, b.AllowRetry(false))
		assert.False(t, b.AllowRetry(false))

		b = httpretry.NewTokenBucket(httpretry.TokenBucketConfig{})
		n = 0
		for b.AllowRetry(true) {
			n++
		}
		assert.Equal(t, 50, n, "10 per retry after an attempt timeout")
	})
}

// tlsUnknownAuthority returns the error net/http gives for a server whose
// certificate comes from an unknown authority: a *url.Error holding a
// *tls.CertificateVerificationError.
func tlsUnknownAuthority(t *testing.T) (*httptest.Server, error) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, err := (&http.Client{Transport: newBare()}).Get(srv.URL)
	var cve *tls.CertificateVerificationError
	require.ErrorAs(t, err, &cve)
	return srv, err
}

// TestCompareAWSClassify asks each classifier about the same failures. For
// the SDK, each transport error is asked twice: as net/http returns it,
// and as the SDK's retryer actually receives it, wrapped by smithy-go's
// ClientHandler in a *smithyhttp.RequestSendError, which reports itself a
// connection error: through an SDK client every transport error, a
// certificate error included, is retryable (TestCompareAWSTLSUnknownAuthority
// runs it). A bare context.DeadlineExceeded is retryable to the SDK's
// classifier (it has Timeout() true), but when the caller's context has
// ended ClientHandler hands over a *smithy.CanceledError, which is not;
// httpretry classifies a DeadlineExceeded as an attempt timeout, having
// checked the caller's context first.
func TestCompareAWSClassify(t *testing.T) {
	_, tlsErr := tlsUnknownAuthority(t)
	reset := &url.Error{Op: "Get", URL: "http://example.com", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	cases := []struct {
		name      string
		status    int    // a response, when non-zero
		code      string // its AWS error code
		err       error  // else a transport error
		aws       bool   // retryable as net/http returns it
		awsSent   bool   // retryable as the SDK's retryer sees it
		httpretry httpretry.Class
	}{
		{name: "connection reset", err: reset, aws: true, awsSent: true, httpretry: httpretry.ClassTransient},
		{name: "503", status: 503, aws: true, httpretry: httpretry.ClassTransient},
		{name: "500", status: 500, aws: true, httpretry: httpretry.ClassTransient},
		{name: "429", status: 429, aws: true, httpretry: httpretry.ClassTransient},
		{name: "400 ThrottlingException", status: 400, code: "ThrottlingException", aws: true, httpretry: httpretry.ClassFatal},
		{name: "404", status: 404, aws: false, httpretry: httpretry.ClassFatal},
		{name: "context.Canceled", err: context.Canceled, aws: false, awsSent: false, httpretry: httpretry.ClassFatal},
		{name: "context.DeadlineExceeded", err: context.DeadlineExceeded, aws: true, awsSent: false, httpretry: httpretry.ClassTransient},
		{name: "TLS unknown authority", err: tlsErr, aws: false, awsSent: true, httpretry: httpretry.ClassFatal},
	}
	s := retry.NewStandard()
	req := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.status != 0 {
				assert.Equal(t, c.aws, s.IsErrorRetryable(awsResponseError(c.status, c.code)), "aws-sdk")
				resp := &http.Response{StatusCode: c.status, Header: http.Header{}, Body: http.NoBody, Request: req}
				assert.Equal(t, c.httpretry, httpretry.Classify(req, resp, nil), "httpretry")
				return
			}
			assert.Equal(t, c.aws, s.IsErrorRetryable(c.err), "aws-sdk, as net/http returns it")
			sent := error(&smithyhttp.RequestSendError{Err: c.err})
			if errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded) {
				// When the caller's context has ended, ClientHandler hands
				// over smithy's CanceledError instead, which is never retried.
				sent = &smithy.CanceledError{Err: c.err}
			}
			assert.Equal(t, c.awsSent, s.IsErrorRetryable(sent), "aws-sdk, as its ClientHandler hands it over")
			assert.Equal(t, c.httpretry, httpretry.Classify(req, nil, c.err), "httpretry")
		})
	}
}

// TestCompareAWSTLSUnknownAuthority: through an SDK operation, a
// certificate from an unknown authority is retried until the attempts run
// out (3), because ClientHandler wraps it in a RequestSendError. httpretry
// makes one attempt (TestCompareTLSUnknownAuthority/httpretry).
func TestCompareAWSTLSUnknownAuthority(t *testing.T) {
	srv, _ := tlsUnknownAuthority(t)
	tr := &tracker{base: newBare()}
	err := (&awsOp{retryer: awsRetryer(), client: &http.Client{Transport: tr}, method: http.MethodGet, url: srv.URL}).do(context.Background())
	var me *retry.MaxAttemptsError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, 3, me.Attempt)
	assert.Equal(t, int32(3), tr.attempts.Load(), "attempts")
	var cve *tls.CertificateVerificationError
	assert.ErrorAs(t, err, &cve, "the certificate error is reachable")
}

// TestCompareAWSPOSTAfterServerGotIt: the server processed a POST and
// answered 503. The SDK sends it again, 3 times in all, with the whole
// body, without an idempotency key (an operation whose model has a client
// token carries one in its input; the retry layer adds none). Every
// attempt carries the same Amz-Sdk-Invocation-Id and an Amz-Sdk-Request
// header with the attempt number.
func TestCompareAWSPOSTAfterServerGotIt(t *testing.T) {
	srv := newRecorder(t, 503)
	err := (&awsOp{retryer: awsRetryer(), client: &http.Client{Transport: newBare()}, method: http.MethodPost, url: srv.URL, body: "charge 10 EUR"}).do(context.Background())
	require.Error(t, err)
	got := srv.received()
	require.Len(t, got, 3, "POSTs the server processed")
	inv := got[0].header.Get("Amz-Sdk-Invocation-Id")
	assert.NotEmpty(t, inv)
	for i, r := range got {
		assert.Equal(t, "charge 10 EUR", r.body, "every attempt carries the whole body")
		assert.Empty(t, r.header.Get("Idempotency-Key"))
		assert.Equal(t, inv, r.header.Get("Amz-Sdk-Invocation-Id"), "one invocation id")
		assert.Equal(t, fmt.Sprintf("attempt=%d; max=3", i+1), r.header.Get("Amz-Sdk-Request"))
	}
}

// TestCompareAWSCallerRequestAndBodies: the retry middleware clones the
// request it is handed for every attempt and leaves the original alone
// (the caller of an SDK client passes an input struct, never an
// *http.Request). Each error response is drained and closed by the
// deserializer (smithyhttp.CloseResponseBody drains to EOF, without a
// limit), before the retry layer decides.
func TestCompareAWSCallerRequestAndBodies(t *testing.T) {
	srv := newRecorder(t, 503, 503, 200)
	tr := &tracker{base: newBare()}
	op := &awsOp{retryer: awsRetryer(), client: &http.Client{Transport: tr}, method: http.MethodGet, url: srv.URL}
	require.NoError(t, op.do(context.Background()))
	require.NotNil(t, op.handed)
	assert.Empty(t, op.handed.Header.Get("Amz-Sdk-Request"), "set on the clones only")
	closed := tr.closed()
	require.Len(t, closed, 3)
	assert.Equal(t, []bool{true, true}, closed[:2], "the two 503s")
	for i, r := range srv.received() {
		assert.Equal(t, fmt.Sprintf("attempt=%d; max=3", i+1), r.header.Get("Amz-Sdk-Request"))
	}
}

// TestCompareAWSLastResponseOnExhaustion: after three 503s the operation
// fails with a *retry.MaxAttemptsError wrapping the last attempt's error,
// which still names the last response (status 503, body already drained
// and closed); a generated client returns no output with it.
func TestCompareAWSLastResponseOnExhaustion(t *testing.T) {
	srv := newRecorder(t, 503)
	err := (&awsOp{retryer: awsRetryer(), client: &http.Client{Transport: newBare()}, method: http.MethodGet, url: srv.URL}).do(context.Background())
	var me *retry.MaxAttemptsError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, 3, me.Attempt)
	var re *awshttp.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 503, re.HTTPStatusCode())
	assert.Contains(t, err.Error(), "exceeded maximum number of attempts, 3")
}

// TestCompareAWSRetryAfter: the SDK does not read Retry-After: a 429 asking
// for an hour is retried after the computed backoff (zero here), 3
// attempts at once. It reads its own x-amz-retry-after (milliseconds) and
// clamps it to [backoff, backoff+5 s]: with a backoff of −4.99 s the
// ceiling is 10 ms, and a one-hour x-amz-retry-after is cut to it (a test
// with a positive backoff would wait 5 s). httpretry returns a 429 asking
// for an hour at once (TestCompareRetryAfterHour/httpretry).
func TestCompareAWSRetryAfter(t *testing.T) {
	t.Run("Retry-After ignored", func(t *testing.T) {
		srv := newRecorder(t, 429)
		srv.header.Set("Retry-After", "3600")
		start := time.Now()
		err := (&awsOp{retryer: awsRetryer(), client: &http.Client{Transport: newBare()}, method: http.MethodGet, url: srv.URL}).do(context.Background())
		var me *retry.MaxAttemptsError
		require.ErrorAs(t, err, &me)
		assert.Len(t, srv.received(), 3)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("x-amz-retry-after clamped", func(t *testing.T) {
		srv := newRecorder(t, 503, 200)
		srv.header.Set("X-Amz-Retry-After", "3600000") // one hour
		var scheduled time.Duration
		r := retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
				scheduled = -5*time.Second + 10*time.Millisecond
				return scheduled, nil
			})
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, (&awsOp{retryer: r, client: &http.Client{Transport: newBare()}, method: http.MethodGet, url: srv.URL}).do(ctx))
		got := srv.received()
		require.Len(t, got, 2)
		gap := got[1].at.Sub(got[0].at)
		t.Logf("backoff %v, x-amz-retry-after 1h: retried after %v", scheduled, gap)
		assert.GreaterOrEqual(t, gap, 10*time.Millisecond, "the header was obeyed up to backoff+5 s")
		assert.Less(t, gap, time.Second, "and no further")
	})
}

// TestCompareAWSDeadline: the SDK starts a wait that cannot end before the
// context's deadline. The backoff asks for an hour with a minute left; the
// test cancels the context when the wait is computed, and the operation
// ends with *aws.RequestCanceledError, the error of an interrupted sleep,
// not with the 503. httpretry returns the 503 at once
// (TestCompareDeadlineAwareWait/httpretry).
func TestCompareAWSDeadline(t *testing.T) {
	srv := newRecorder(t, 503, 200)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
			cancel() // the SDK's timer is armed for an hour; end it now
			return time.Hour, nil
		})
	})
	err := (&awsOp{retryer: r, client: &http.Client{Transport: newBare()}, method: http.MethodGet, url: srv.URL}).do(ctx)
	var rc *aws.RequestCanceledError
	require.ErrorAs(t, err, &rc)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, srv.received(), 1)
}

// TestCompareAWSQuotaStopsRetries: once the quota cannot pay for a retry,
// a failed attempt is returned at once, its error joined with the
// QuotaExceededError (httpretry: the failure, StopBudget; see
// TestCompareDefaultBudget/httpretry).
func TestCompareAWSQuotaStopsRetries(t *testing.T) {
	r := awsRetryer()
	for {
		if _, err := r.GetRetryToken(context.Background(), awsResponseError(503, "")); err != nil {
			break
		}
	}
	srv := newRecorder(t, 503)
	err := (&awsOp{retryer: r, client: &http.Client{Transport: newBare()}, method: http.MethodGet, url: srv.URL}).do(context.Background())
	var qe ratelimit.QuotaExceededError
	assert.ErrorAs(t, err, &qe)
	var re *awshttp.ResponseError
	assert.ErrorAs(t, err, &re, "the 503 is in the error too")
	assert.Len(t, srv.received(), 1)
}
