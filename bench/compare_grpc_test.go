package bench

// grpc-go v1.85.0's retries (gRFC A6: a service config retryPolicy and
// retryThrottling) next to httpretry. A real gRPC server and client talk
// over an in-memory bufconn listener (no ports); the service is grpc-go's
// own generated health service (grpc.health.v1.Health), whose Check and
// List answer UNAVAILABLE while the test says so. Backoffs are 1 ms except
// where a test measures them or needs a wait that cannot end.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	hv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// healthServer answers Check and List, with UNAVAILABLE while failing, and
// records every attempt it receives.
type healthServer struct {
	hv1.UnimplementedHealthServer
	mu       sync.Mutex
	failing  bool
	pushback string        // grpc-retry-pushback-ms trailer sent with each failure, if set
	hold     time.Duration // how long the very first attempt waits before answering
	attempts []grpcAttempt
}

type grpcAttempt struct {
	method string
	md     metadata.MD
	at     time.Time
	failed bool // answered UNAVAILABLE
}

func (s *healthServer) answer(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.attempts = append(s.attempts, grpcAttempt{method, md, time.Now(), s.failing})
	first := len(s.attempts) == 1
	failing, pushback, hold := s.failing, s.pushback, s.hold
	s.mu.Unlock()
	if first && hold > 0 {
		select {
		case <-time.After(hold):
		case <-ctx.Done():
		}
	}
	if !failing {
		return nil
	}
	if pushback != "" {
		grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", pushback))
	}
	return status.Error(codes.Unavailable, "down")
}

func (s *healthServer) Check(ctx context.Context, _ *hv1.HealthCheckRequest) (*hv1.HealthCheckResponse, error) {
	if err := s.answer(ctx, "Check"); err != nil {
		return nil, err
	}
	return &hv1.HealthCheckResponse{Status: hv1.HealthCheckResponse_SERVING}, nil
}

func (s *healthServer) List(ctx context.Context, _ *hv1.HealthListRequest) (*hv1.HealthListResponse, error) {
	if err := s.answer(ctx, "List"); err != nil {
		return nil, err
	}
	return &hv1.HealthListResponse{}, nil
}

func (s *healthServer) setFailing(f bool) {
	s.mu.Lock()
	s.failing = f
	s.mu.Unlock()
}

// take returns the attempts received since the last call and forgets them.
func (s *healthServer) take() []grpcAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.attempts
	s.attempts = nil
	return a
}

// grpcSetup is one server and one client channel over bufconn.
type grpcSetup struct {
	srv    *healthServer
	lis    *bufconn.Listener
	client hv1.HealthClient
}

// startGRPC starts a health server (failing from the start) on a bufconn
// listener, with serverOpts.
func startGRPC(t *testing.T, serverOpts ...grpc.ServerOption) *grpcSetup {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(serverOpts...)
	hs := &healthServer{failing: true}
	hv1.RegisterHealthServer(gs, hs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return &grpcSetup{srv: hs, lis: lis}
}

// dial opens a channel to the setup's server with serviceConfig as its
// default service config (the passthrough resolver supplies none of its
// own), plaintext unless opts say otherwise.
func (g *grpcSetup) dial(t *testing.T, serviceConfig string, opts ...grpc.DialOption) error {
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return g.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		return err
	}
	t.Cleanup(func() { cc.Close() })
	g.client = hv1.NewHealthClient(cc)
	return nil
}

func newGRPC(t *testing.T, serviceConfig string, opts ...grpc.DialOption) *grpcSetup {
	g := startGRPC(t)
	require.NoError(t, g.dial(t, serviceConfig, opts...))
	return g
}

func (g *grpcSetup) check(ctx context.Context) error {
	_, err := g.client.Check(ctx, &hv1.HealthCheckRequest{})
	return err
}

// retryPolicy is a retryPolicy object of a service config: UNAVAILABLE is
// retried, backoff in seconds (a JSON duration) with multiplier 1 unless
// changed.
func retryPolicy(maxAttempts int, backoff string) string {
	return fmt.Sprintf(`{"maxAttempts": %d, "initialBackoff": %q, "maxBackoff": %q, "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}`,
		maxAttempts, backoff, backoff)
}

// serviceConfig applies policy to every method of the health service;
// throttling, if not empty, is a retryThrottling object.
func serviceConfig(policy, throttling string) string {
	sc := `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}], "retryPolicy": ` + policy + `}]`
	if throttling != "" {
		sc += `, "retryThrottling": ` + throttling
	}
	return sc + "}"
}

// TestCompareGRPCMaxAttempts: maxAttempts is required and must be above 1
// (a policy without it is rejected: there is no default number of
// attempts, and without a retryPolicy nothing is retried); values above 5
// are clamped to 5 unless the client raises the limit with
// grpc.WithMaxCallAttempts.
func TestCompareGRPCMaxAttempts(t *testing.T) {
	cases := []struct {
		name     string
		config   string
		opts     []grpc.DialOption
		attempts int
	}{
		{"maxAttempts 3", serviceConfig(retryPolicy(3, "0.001s"), ""), nil, 3},
		{"maxAttempts 10 clamped", serviceConfig(retryPolicy(10, "0.001s"), ""), nil, 5},
		{"maxAttempts 10 with WithMaxCallAttempts(7)", serviceConfig(retryPolicy(10, "0.001s"), ""), []grpc.DialOption{grpc.WithMaxCallAttempts(7)}, 7},
		{"no retryPolicy", `{}`, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGRPC(t, c.config, c.opts...)
			assert.Equal(t, codes.Unavailable, status.Code(g.check(context.Background())))
			assert.Len(t, g.srv.take(), c.attempts)
		})
	}
	for _, n := range []int{0, 1} {
		t.Run(fmt.Sprintf("maxAttempts %d rejected", n), func(t *testing.T) {
			policy := fmt.Sprintf(`{"initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]%s}`,
				map[int]string{0: "", 1: `, "maxAttempts": 1`}[n])
			err := startGRPC(t).dial(t, serviceConfig(policy, ""))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "invalid retry policy")
		})
	}
}

// TestCompareGRPCLastStatusOnExhaustion: after maxAttempts UNAVAILABLE
// answers the call fails with the last attempt's status code, its message
// prefixed with "max retries exhausted: failed after 3 attempts".
func TestCompareGRPCLastStatusOnExhaustion(t *testing.T) {
	g := newGRPC(t, serviceConfig(retryPolicy(3, "0.001s"), ""))
	err := g.check(context.Background())
	st, ok := status.FromError(err)
	require.True(t, ok)
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Equal(t, "max retries exhausted: failed after 3 attempts: rpc error: code = Unavailable desc = down", st.Message())
	assert.Len(t, g.srv.take(), 3)
}

// TestCompareGRPCRetryThrottling: retryThrottling {maxTokens 10,
// tokenRatio 0.1}. The channel starts with 10 tokens; each failure with a
// retryable code takes 1 and each successful call adds 0.1; a retry is
// allowed only while more than maxTokens/2 = 5 remain. The first failing
// call gets 5 attempts (10 → 5 tokens); after that one attempt per call,
// until successes restore the tokens: 15 successes (+1.5) are not enough,
// 24 more (+2.4) buy exactly one retry.
//
// httpretry's default budget under the same script (4 attempts per call,
// a token bucket of 500, 5 per retry, +1 per clean success): 33 calls get
// 4 attempts, the 34th 2, then one attempt per call; 4 successes are not
// enough, a 5th buys one retry.
func TestCompareGRPCRetryThrottling(t *testing.T) {
	t.Run("grpc-go", func(t *testing.T) {
		g := newGRPC(t, serviceConfig(retryPolicy(5, "0.001s"), `{"maxTokens": 10, "tokenRatio": 0.1}`))
		var lastErr error
		failingCall := func() int {
			g.srv.setFailing(true)
			lastErr = g.check(context.Background())
			require.Error(t, lastErr)
			return len(g.srv.take())
		}
		succeed := func(n int) {
			g.srv.setFailing(false)
			for range n {
				require.NoError(t, g.check(context.Background()))
			}
			g.srv.take()
		}
		assert.Equal(t, 5, failingCall(), "10 → 5 tokens")
		assert.Equal(t, 1, failingCall(), "5 → 4: retries stopped")
		assert.Equal(t, "down", status.Convert(lastErr).Message(), "a throttled call ends with the bare status")
		succeed(15) // 4 → 5.5
		assert.Equal(t, 1, failingCall(), "5.5 → 4.5: not above 5")
		succeed(24) // 4.5 → 6.9
		assert.Equal(t, 2, failingCall(), "6.9 → 5.9: one retry, → 4.9: stop")
	})
	t.Run("httpretry", func(t *testing.T) {
		var failing atomic.Bool
		var got atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			got.Add(1)
			if failing.Load() {
				w.WriteHeader(503)
			}
		}))
		t.Cleanup(srv.Close)
		rt := newHTTPRetry(newBare(), 0) // the default policy and budget, waits of zero
		call := func() int {
			got.Store(0)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			closeResp(resp)
			return int(got.Load())
		}
		failingCall := func() int {
			failing.Store(true)
			return call()
		}
		succeed := func(n int) {
			failing.Store(false)
			for range n {
				require.Equal(t, 1, call())
			}
		}
		for i := range 33 {
			require.Equal(t, 4, failingCall(), "call %d: 500 → %d tokens", i+1, 500-15*(i+1))
		}
		assert.Equal(t, 2, failingCall(), "5 → 0 tokens")
		assert.Equal(t, 1, failingCall(), "retries stopped")
		succeed(4)
		assert.Equal(t, 1, failingCall(), "4 tokens: a retry costs 5")
		succeed(1)
		assert.Equal(t, 2, failingCall(), "5 → 0: one retry")
	})
}

// TestCompareGRPCBackoff measures the waits between attempts with
// initialBackoff = maxBackoff = 40 ms (8 calls at once, 4 waits each).
// grpc-go draws min(initialBackoff·multiplier^(n−1), maxBackoff)·U(0.8,
// 1.2): no wait is shorter than 0.8·maxBackoff (under full jitter, most
// would be), waits fall on both sides of maxBackoff, and the cap is not a
// ceiling on the wait. A server-side gap is the client's wait plus the
// latency of one call, so it can only overstate a wait.
func TestCompareGRPCBackoff(t *testing.T) {
	const maxBackoff = 40 * time.Millisecond
	g := newGRPC(t, serviceConfig(retryPolicy(5, "0.04s"), ""))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-call", strconv.Itoa(i))
			assert.Error(t, g.check(ctx))
		})
	}
	wg.Wait()
	last := map[string]time.Time{}
	var gaps []time.Duration
	for _, a := range g.srv.take() {
		call := a.md.Get("x-call")[0]
		if prev, ok := last[call]; ok {
			gaps = append(gaps, a.at.Sub(prev))
		}
		last[call] = a.at
	}
	require.Len(t, gaps, 32)
	lo, hi := gaps[0], gaps[0]
	for _, d := range gaps {
		lo, hi = min(lo, d), max(hi, d)
	}
	t.Logf("maxBackoff %v: waits from %v (%.2f×) to %v (%.2f×)", maxBackoff, lo, float64(lo)/float64(maxBackoff), hi, float64(hi)/float64(maxBackoff))
	assert.GreaterOrEqual(t, lo, maxBackoff*8/10, "never below 0.8·maxBackoff: not full jitter")
	assert.Less(t, lo, maxBackoff, "jittered below the cap")
	assert.Greater(t, hi, maxBackoff*105/100, "and above it")
}

// TestCompareGRPCPushback: the server's grpc-retry-pushback-ms trailer, the
// gRPC counterpart of Retry-After. A pushback of an hour is obeyed as is,
// above maxBackoff (1 ms here): no second attempt before the call's 20 ms
// deadline, which the call then fails with. A negative pushback stops
// retrying at once. A pushback of 0 replaces the backoff (10 s here): all
// 5 attempts are made at once.
//
// Server and channel live in a synctest bubble: the deadline runs on its
// clock, which moves only while every goroutine of both waits, so the
// connection's set-up and the first attempt take none of the 20 ms however
// loaded the machine is, and the deadline can only expire in the wait the
// pushback started.
func TestCompareGRPCPushback(t *testing.T) {
	cases := []struct {
		pushback string
		backoff  string
		attempts int
		code     codes.Code
	}{
		{"3600000", "0.001s", 1, codes.DeadlineExceeded},
		{"-1", "0.001s", 1, codes.Unavailable},
		{"0", "10s", 5, codes.Unavailable},
	}
	for _, c := range cases {
		t.Run(c.pushback, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGRPC(t, serviceConfig(retryPolicy(5, c.backoff), ""))
				g.srv.pushback = c.pushback
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				if c.pushback == "0" {
					ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
				}
				err := g.check(ctx)
				assert.Equal(t, c.code, status.Code(err), "%v", err)
				assert.Len(t, g.srv.take(), c.attempts)
			})
		})
	}
}

// TestCompareGRPCDeadline: grpc-go starts a backoff that cannot end before
// the call's deadline (its source says as much, in a TODO): with a 10 s
// backoff and 20 ms left, the call waits out its deadline and fails
// DEADLINE_EXCEEDED instead of returning the UNAVAILABLE it had. The call
// returns no earlier than the context's own deadline, and the server
// answered its one attempt UNAVAILABLE. In a synctest bubble, as
// TestCompareGRPCPushback is, so that the deadline is not spent on the
// channel's set-up and the first attempt.
func TestCompareGRPCDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGRPC(t, serviceConfig(retryPolicy(5, "10s"), ""))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		deadline, _ := ctx.Deadline()
		err := g.check(ctx)
		returned := time.Now()
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		assert.False(t, returned.Before(deadline), "returned %v before the deadline", deadline.Sub(returned))
		got := g.srv.take()
		require.Len(t, got, 1, "one attempt, then the wait")
		assert.True(t, got[0].failed, "answered UNAVAILABLE: the status the call had before it waited")
	})
}

// TestCompareGRPCRetriesProcessedCalls: gRPC has no notion of a
// non-idempotent call. A call the server processed and answered
// UNAVAILABLE is sent again, maxAttempts times; the retries carry
// grpc-previous-rpc-attempts and no idempotency key.
func TestCompareGRPCRetriesProcessedCalls(t *testing.T) {
	g := newGRPC(t, serviceConfig(retryPolicy(4, "0.001s"), ""))
	require.Error(t, g.check(context.Background()))
	got := g.srv.take()
	require.Len(t, got, 4, "calls the server processed")
	for i, a := range got {
		prev := a.md.Get("grpc-previous-rpc-attempts")
		if i == 0 {
			assert.Empty(t, prev)
		} else {
			assert.Equal(t, []string{strconv.Itoa(i)}, prev)
		}
		assert.Empty(t, a.md.Get("idempotency-key"))
	}
}

// TestCompareGRPCTLSUnknownAuthority: a server certificate from an unknown
// authority fails the call UNAVAILABLE, a code the policy retries: the
// call is attempted 5 times (maxAttempts), though only one TLS handshake
// takes place, since reconnecting is paced by the channel's own connection
// backoff (1 s at first), not by the retry policy. The certificate error
// survives only as text in the status message.
func TestCompareGRPCTLSUnknownAuthority(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.NotFoundHandler())
	hs.StartTLS() // only for its certificate, for example.com, from an unknown authority
	cfg := hs.TLS.Clone()
	hs.Close()
	var handshakes atomic.Int32
	cfg.NextProtos = []string{"h2"}
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		handshakes.Add(1)
		return nil, nil
	}
	g := startGRPC(t, grpc.Creds(credentials.NewTLS(cfg)))
	require.NoError(t, g.dial(t, serviceConfig(retryPolicy(5, "0.001s"), ""),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: "example.com"}))))
	for range 2 {
		err := g.check(context.Background())
		st, _ := status.FromError(err)
		assert.Equal(t, codes.Unavailable, st.Code())
		assert.Contains(t, st.Message(), "failed after 5 attempts")
		assert.Contains(t, st.Message(), "x509: certificate signed by unknown authority")
		var cve *tls.CertificateVerificationError
		assert.NotErrorAs(t, err, &cve, "only the text is left")
	}
	assert.Empty(t, g.srv.take(), "no call reached the server")
	assert.Equal(t, int32(1), handshakes.Load(), "handshakes")
}

// TestCompareGRPCHedgingIgnored: grpc-go accepts a hedgingPolicy in the
// service config and does nothing with it: with a 1 ms hedging delay and
// a server that takes 50 ms to answer, no second attempt is sent.
func TestCompareGRPCHedgingIgnored(t *testing.T) {
	g := newGRPC(t, `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}],
		"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.001s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`)
	g.srv.setFailing(false)
	g.srv.hold = 50 * time.Millisecond
	require.NoError(t, g.check(context.Background()))
	assert.Len(t, g.srv.take(), 1, "attempts")
}

// TestCompareGRPCPerMethodPolicy: a service config names policies per
// service or per method; here Check is retried and List, without a
// policy, is not. Throttling, when configured, is shared by the channel.
func TestCompareGRPCPerMethodPolicy(t *testing.T) {
	g := newGRPC(t, `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health", "method": "Check"}], "retryPolicy": `+retryPolicy(4, "0.001s")+`}]}`)
	require.Error(t, g.check(context.Background()))
	assert.Len(t, g.srv.take(), 4, "Check")
	_, err := g.client.List(context.Background(), &hv1.HealthListRequest{})
	require.Error(t, err)
	assert.Len(t, g.srv.take(), 1, "List")
}
