package sim

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"

	"github.com/seedhq/httpretry"
)

// An Arm is one client compared in the overload scenarios (D, C2 on the
// Transport, E): the real httpretry.Transport with some protection, in
// front of a simulated Host, on the synctest clock.
type Arm struct {
	Name string
	// New returns the client that sends the scenario's requests to host,
	// given the scenario's policy. It is called inside the bubble.
	New func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper
}

// NoRetries sends each request once.
func NoRetries() Arm {
	return Arm{"no retries", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.MaxAttempts = 1
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// RetriesNoBudget retries as the policy says, without a retry budget:
// what go-retryablehttp and failsafe-go do by default.
func RetriesNoBudget() Arm {
	return Arm{"retries, no budget", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.NewBudget = httpretry.NoBudget
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// RetryBudget is httpretry as configured today: retries with the default
// token bucket per host.
func RetryBudget() Arm {
	return Arm{"retry budget", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// Throttle is the retry budget plus httpretry's adaptive throttling with
// multiplier k (0: the default, 2).
func Throttle(k float64) Arm {
	name := "+ throttling, K = 2"
	if k != 0 {
		name = "+ throttling, K = " + strconv.FormatFloat(k, 'g', -1, 64)
	}
	return Arm{name, func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.Overload = httpretry.OverloadPolicy{Throttle: true, ThrottleK: k}
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// Limit is the retry budget plus httpretry's adaptive concurrency limit,
// with its default waiting room, or with none (failFast).
func Limit(failFast bool) Arm {
	name, o := "+ concurrency limit", httpretry.OverloadPolicy{Limit: true}
	if failFast {
		name, o.LimitQueue = "+ concurrency limit, fail fast", -1
	}
	return Arm{name, func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.Overload = o
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// Pace is the retry budget plus pacing by the host's announced rate limit,
// told to read X-RateLimit-Remaining with the policy's reset header.
func Pace() Arm {
	return Arm{"+ pacing", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.Overload = httpretry.OverloadPolicy{Pace: true}
		p.Hints.RemainingHeader = "X-RateLimit-Remaining"
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// FailsafeThrottler puts failsafe-go v0.9.8's adaptivethrottler, with its
// defaults (throttling above 10 % failures over a minute, at most 90 %
// rejected), under the Transport and its retry budget, so that it sees
// every attempt, as httpretry's own throttle will. Failures are the
// overload outcomes httpretry's throttle counts (429, 502, 503, 504 and
// errors); its refusals end the request.
func FailsafeThrottler() Arm {
	return Arm{"budget + failsafe-go adaptivethrottler", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		th := adaptivethrottler.NewBuilder[*http.Response]().HandleIf(overloaded).Build()
		return &httpretry.Transport{Base: fsThrottled{host, th}, Policy: fatalOn(p, adaptivethrottler.ErrExceeded)}
	}}
}

// FailsafeLimiter puts failsafe-go v0.9.8's adaptivelimiter, with its
// defaults (limits 1–200 starting at 20, no queue: over the limit fails
// at once), under the Transport and its retry budget.
func FailsafeLimiter() Arm {
	return Arm{"budget + failsafe-go adaptivelimiter", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		l := adaptivelimiter.NewBuilder[*http.Response]().Build()
		return &httpretry.Transport{Base: fsLimited{host, l}, Policy: fatalOn(p, adaptivelimiter.ErrExceeded)}
	}}
}

// overloaded is the failure predicate given to failsafe-go's throttler.
func overloaded(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// fatalOn makes the policy stop on a refusal by a layer under the
// Transport instead of retrying it as an unknown error.
func fatalOn(p httpretry.Policy, refusal error) httpretry.Policy {
	p.Classify = func(_ *http.Request, _ *http.Response, err error) httpretry.Class {
		if errors.Is(err, refusal) {
			return httpretry.ClassFatal
		}
		return httpretry.ClassDefault
	}
	return p
}

type fsThrottled struct {
	next http.RoundTripper
	th   adaptivethrottler.AdaptiveThrottler[*http.Response]
}

func (f fsThrottled) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := f.th.AcquirePermit(); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		f.th.RecordError(err)
	} else {
		f.th.RecordResult(resp)
	}
	return resp, err
}

type fsLimited struct {
	next http.RoundTripper
	l    adaptivelimiter.AdaptiveLimiter[*http.Response]
}

// RoundTrip takes a permit as failsafe-go's own executor does for a
// limiter without a queue (no wait), and drops it when the request was
// cancelled.
func (f fsLimited) RoundTrip(req *http.Request) (*http.Response, error) {
	permit, err := f.l.AcquirePermitWithMaxWait(req.Context(), 0)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := f.next.RoundTrip(req)
	if errors.Is(err, context.Canceled) {
		permit.Drop()
	} else {
		permit.Record()
	}
	return resp, err
}

// OverloadConfig describes scenario D: a host of capacity μ offered 2μ by
// open-loop callers for a minute. It serves every request that reaches it,
// abandoned or not, so once its queue is longer than the attempt timeout
// it works for nobody: goodput collapses unless the client sheds load.
type OverloadConfig struct {
	Host    HostConfig
	Traffic Traffic
	Policy  httpretry.Policy // the scenario's policy; each arm adds its protection
	// From is when the steady state is measured from.
	From time.Duration
}

// DefaultOverload is scenario D: μ = 300/s (C2's host), offered 600/s for
// 60 s, one-way 0.5 ms, 1 s attempt timeout, 4 attempts, callers that
// wait 5 s at most; measured from t = 10 s.
func DefaultOverload() OverloadConfig {
	return OverloadConfig{
		Host:    HostConfig{Capacity: 300, OneWay: 500 * time.Microsecond},
		Traffic: Traffic{Rate: 600, Duration: 60 * time.Second, Deadline: 5 * time.Second},
		Policy:  httpretry.Policy{AttemptTimeout: time.Second},
		From:    10 * time.Second,
	}
}

// OverloadRun is the outcome of one run of scenario D.
type OverloadRun struct {
	Outcome
	Load    float64 // requests reaching the host per second, from From to the end of the traffic
	Goodput float64 // 2xx answers per second, over the same span
}

// RunOverload runs scenario D once with arm. It must run inside a synctest
// bubble.
func RunOverload(c OverloadConfig, arm Arm, runSeed uint64) OverloadRun {
	host := NewHost(c.Host)
	out := DriveTraffic(arm.New(host, c.Policy), host, c.Traffic, runSeed)
	return OverloadRun{
		Outcome: out,
		Load:    MeanRate(out.Host.Arrivals, c.From, c.Traffic.Duration),
		Goodput: MeanRate(out.Goodput, c.From, c.Traffic.Duration),
	}
}

// RunMetastableTransport runs scenario C2 with the real Transport in front
// of a simulated host instead of the event loop of RunMetastable: the same
// host, traffic and policy (c.NewBudget is ignored; the arm decides). It
// must run inside a synctest bubble.
func RunMetastableTransport(c MetastableConfig, arm Arm, runSeed uint64) MetastableRun {
	host := NewHost(HostConfig{Capacity: c.Capacity, OneWay: c.OneWay, BlipStart: c.BlipStart, BlipEnd: c.BlipEnd})
	p := httpretry.Policy{AttemptTimeout: c.Timeout, MaxAttempts: c.MaxAttempts, Backoff: c.Strategy}
	out := DriveTraffic(arm.New(host, p), host, Traffic{Rate: c.Rate, Duration: c.Duration}, runSeed)
	return MetastableRun{
		Sent:         out.Host.Arrivals,
		Goodput:      out.Goodput,
		Backlog:      out.Host.Backlog,
		Recovered:    recovered(out.Goodput, c.BlipEnd, c.Duration),
		FirstGoodput: firstGoodput(out.Goodput, c.BlipEnd, c.Duration),
	}
}

// QuotaConfig describes scenario E: a batch job against an API that allows
// Quota requests per window and says so.
type QuotaConfig struct {
	Host   HostConfig
	Batch  Batch
	Policy httpretry.Policy
}

// DefaultQuota is scenario E: 100 requests per 10 s window, answers in
// 20 ms, announced by headers; 10 workers work through 1000 requests
// (ten windows' worth) with httpretry's default policy, told which reset
// header the API sends.
func DefaultQuota(h QuotaHeaders) QuotaConfig {
	return QuotaConfig{
		Host: HostConfig{Service: 20 * time.Millisecond, OneWay: 500 * time.Microsecond,
			Quota: 100, QuotaWindow: 10 * time.Second, Headers: h},
		Batch:  Batch{Workers: 10, Total: 1000},
		Policy: httpretry.Policy{Hints: httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset"}},
	}
}

// RunQuota runs scenario E once with arm. It must run inside a synctest
// bubble.
func RunQuota(c QuotaConfig, arm Arm) BatchOutcome {
	host := NewHost(c.Host)
	return DriveBatch(arm.New(host, c.Policy), host, c.Batch)
}

// BucketConfig describes scenario F: open-loop traffic against an API
// whose account has a token-bucket quota, 429 with Retry-After past it.
type BucketConfig struct {
	Host    HostConfig
	Traffic Traffic
	Policy  httpretry.Policy
}

// DefaultBucket is scenario F: 150 requests per second for 20 s against
// a quota of 100 per second with a burst of 10, answers in 20 ms, with
// the RateLimit field (h) or Retry-After alone.
func DefaultBucket(h QuotaHeaders, rate float64) BucketConfig {
	return BucketConfig{
		Host: HostConfig{Service: 20 * time.Millisecond, OneWay: 500 * time.Microsecond,
			BucketRate: 100, BucketBurst: 10, Headers: h},
		Traffic: Traffic{Rate: rate, Duration: 20 * time.Second, Deadline: 5 * time.Second},
	}
}

// RunBucket runs scenario F once with arm. It must run inside a synctest
// bubble.
func RunBucket(c BucketConfig, arm Arm, seed uint64) Outcome {
	host := NewHost(c.Host)
	return DriveTraffic(arm.New(host, c.Policy), host, c.Traffic, seed)
}

// PaceAnnounced is the retry budget plus pacing by what the host
// announces in Retry-After and the RateLimit field.
func PaceAnnounced() Arm {
	return Arm{"+ pacing", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.Overload = httpretry.OverloadPolicy{Pace: true}
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}

// PaceDeclared is PaceAnnounced with the quota declared in the policy.
func PaceDeclared(limit, burst int) Arm {
	return Arm{"+ pacing, quota declared", func(host http.RoundTripper, p httpretry.Policy) http.RoundTripper {
		p.Overload = httpretry.OverloadPolicy{Quota: httpretry.Quota{Limit: limit, Burst: burst}}
		return &httpretry.Transport{Base: host, Policy: p}
	}}
}
