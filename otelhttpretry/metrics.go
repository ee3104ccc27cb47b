package otelhttpretry

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"weak"

	"github.com/seedhq/httpretry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the metrics Instrument
// records: the name of their Meter.
const ScopeName = "github.com/seedhq/httpretry/otelhttpretry"

// The names of the metrics Instrument records. docs/observability.md
// documents each with its unit and attributes.
const (
	MetricAttempts        = "httpretry.attempts"             // counter of attempts Base saw
	MetricAttemptDuration = "httpretry.attempt.duration"     // histogram, seconds per attempt
	MetricCallDuration    = "httpretry.call.duration"        // histogram, seconds per RoundTrip
	MetricRetryDelay      = "httpretry.retry.delay"          // histogram, seconds waited before a retry
	MetricRefusals        = "httpretry.refusals"             // counter of attempts a guard did not let out
	MetricBudgetLevel     = "httpretry.budget.level"         // gauge, share of the host's retry budget left; skipped for a budget reporting +Inf or NaN
	MetricBreakerState    = "httpretry.breaker.state"        // gauge, 0 closed, 1 half-open, 2 open
	MetricThrottle        = "httpretry.throttle.probability" // gauge, probability that adaptive throttling rejects an attempt
	MetricConcurrency     = "httpretry.concurrency.limit"    // gauge, attempts the adaptive concurrency limit allows in flight
)

// The attributes of httpretry's own, beside the semantic conventions'
// server.address, server.port, http.request.method and
// http.response.status_code.
const (
	// AttemptKind says why an attempt was sent: "first", "retry" or
	// "hedge".
	AttemptKind = attribute.Key("httpretry.attempt.kind")
	// AttemptClass is the class of the attempt's outcome, as
	// httpretry.Class.String names it: "success", "transient",
	// "not-processed" or "fatal". A lost hedge has none.
	AttemptClass = attribute.Key("httpretry.attempt.class")
	// AttemptLost is true on an attempt cancelled because another attempt
	// of its round answered first; absent otherwise.
	AttemptLost = attribute.Key("httpretry.attempt.lost")
	// DelaySource says where the wait before a retry came from, as
	// httpretry.DelaySource.String names it: "backoff", "retry-after"
	// or "ratelimit". Only on attempts that are retried.
	DelaySource = attribute.Key("httpretry.delay.source")
	// StopReason says why the call stopped, as httpretry.StopReason.String
	// names it ("success", "attempts exhausted", "retry budget exhausted",
	// …). Only on the attempt that ended the call, and on the call.
	StopReason = attribute.Key("httpretry.stop.reason")
	// RefusalReason says which guard refused an attempt: "budget" (the
	// host's retry budget), "breaker" (its circuit breaker), or one of the
	// overload controls of httpretry.OverloadPolicy: "throttle" (adaptive
	// throttling), "limit" (the adaptive concurrency limit) or "pace"
	// (pacing by the host's rate limit).
	RefusalReason = attribute.Key("httpretry.refusal.reason")
)

// Option configures Instrument.
type Option interface {
	apply(*config)
}

type config struct {
	provider metric.MeterProvider
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider records the metrics with mp. Without it, or with a nil
// mp, Instrument uses the global MeterProvider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.provider = mp })
}

// Instrument records OpenTelemetry metrics of t: a counter of attempts,
// histograms of attempt and call durations and of the waits before
// retries, a counter of attempts a guard refused (the retry budget, the
// circuit breaker, an overload control), and gauges of each host's budget
// level, breaker state, throttling probability and concurrency limit. It
// sets t.OnAttempt and t.OnCall, calling the hooks already there first,
// and registers a callback that reads the gauges when the metrics are
// collected, from the 200 hosts most in trouble (t.StatsPage), whatever
// the number of hosts.
//
// The callback holds t weakly, so that instrumenting a Transport does not
// keep it alive: once t is unreachable, its gauges are no longer observed
// (only reachability counts, not scope: a variable that still names t
// keeps it only up to its last use; a Transport an http.Client sends with
// is reachable as long as the client is). Its counters go on reporting
// what it counted, so that a cumulative counter never goes backwards, as
// a backend would read a reset: the callback, and a few kilobytes of
// counts and attribute sets, stay registered with the MeterProvider for as
// long as it lives. Instrument the Transports a process keeps, not one per
// request.
//
// Call it once per Transport, before the Transport's first use: like any
// field of a Transport, the hooks must not change once requests flow.
//
// Attributes are bounded: the host (server.address, and server.port unless
// it is 80 or 443, from Attempt.Host), the method (unknown methods as "_OTHER"), the status
// code, and httpretry's own enumerations; never a path, a query or a key.
// Past the first 100 hosts, further hosts are recorded as server.address
// "_OTHER", and the gauges report the worst of them there.
//
// http.client.request.duration, the semantic conventions' metric of each
// request sent on the wire, is the HTTP instrumentation's to record: with
// NewTransport as t.Base, otelhttp records it, once per attempt.
func Instrument(t *httpretry.Transport, opts ...Option) error {
	if t == nil {
		return errors.New("otelhttpretry: Instrument of a nil Transport")
	}
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	m, err := newMetrics(c.provider.Meter(ScopeName))
	if err != nil {
		return err
	}
	if _, err := m.register(weak.Make(t)); err != nil {
		return err
	}

	if prev := t.OnAttempt; prev != nil {
		t.OnAttempt = func(a httpretry.Attempt) { prev(a); m.attempt(a) }
	} else {
		t.OnAttempt = m.attempt
	}
	if prev := t.OnCall; prev != nil {
		t.OnCall = func(c httpretry.Call) { prev(c); m.call(c) }
	} else {
		t.OnCall = m.call
	}
	return nil
}

// Bucket boundaries, in seconds. Durations take the semantic conventions'
// advice for http.client.request.duration; delays reach up to a minute,
// the default ceiling on a server's Retry-After.
var (
	durationBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	delayBuckets    = []float64{0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// metrics holds the instruments of one Transport and the attribute sets
// they are recorded with, built once per combination.
//
// The two counters are observable: each combination of attributes keeps
// its count in an atomic, which the collection reads. An addition is then
// one atomic increment, where the SDK's synchronous Add would normalise
// and hash every attribute of the set on each call; the histograms have no
// observable form and are recorded as they happen.
type metrics struct {
	meter        metric.Meter
	attempts     metric.Int64ObservableCounter
	attemptDur   metric.Float64Histogram
	callDur      metric.Float64Histogram
	delay        metric.Float64Histogram
	refusals     metric.Int64ObservableCounter
	budgetLevel  metric.Float64ObservableGauge
	breakerState metric.Int64ObservableGauge
	throttle     metric.Float64ObservableGauge
	concurrency  metric.Int64ObservableGauge

	hosts       hostSet
	attemptOpts cache[attemptKey, *attemptOpts]
	callOpts    cache[callKey, *callOpts]
	refusalOpts cache[refusalKey, *counter]

	// Counts of combinations past maxEntries, under the attribute the SDK
	// gives its own overflow.
	attemptOverflow, refusalOverflow counter
}

// counter is a count under one attribute set.
type counter struct {
	n   atomic.Int64
	set attribute.Set
}

// overflowSet marks counts whose attributes were not kept, as the SDK does
// past its cardinality limit.
var overflowSet = attribute.NewSet(attribute.Bool("otel.metric.overflow", true))

func newMetrics(meter metric.Meter) (*metrics, error) {
	m := &metrics{meter: meter}
	m.attemptOverflow.set, m.refusalOverflow.set = overflowSet, overflowSet
	var err, e error
	m.attempts, e = meter.Int64ObservableCounter(MetricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent by the retrying transport, hedges included."))
	err = errors.Join(err, e)
	m.attemptDur, e = meter.Float64Histogram(MetricAttemptDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each attempt, from sending it to its response header or error."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	m.callDur, e = meter.Float64Histogram(MetricCallDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each call of the retrying transport, every attempt and wait included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = errors.Join(err, e)
	m.delay, e = meter.Float64Histogram(MetricRetryDelay, metric.WithUnit("s"),
		metric.WithDescription("Wait decided before each retry."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	err = errors.Join(err, e)
	m.refusals, e = meter.Int64ObservableCounter(MetricRefusals, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts not sent because the host's retry budget, circuit breaker or overload control refused them."))
	err = errors.Join(err, e)
	m.budgetLevel, e = meter.Float64ObservableGauge(MetricBudgetLevel, metric.WithUnit("1"),
		metric.WithDescription("Share of the host's retry budget available, from 0 (empty) to 1 (full)."))
	err = errors.Join(err, e)
	m.breakerState, e = meter.Int64ObservableGauge(MetricBreakerState,
		metric.WithDescription("State of the host's circuit breaker: 0 closed, 1 half-open, 2 open."))
	err = errors.Join(err, e)
	m.throttle, e = meter.Float64ObservableGauge(MetricThrottle, metric.WithUnit("1"),
		metric.WithDescription("Probability that the host's adaptive throttling rejects an attempt sent now."))
	err = errors.Join(err, e)
	m.concurrency, e = meter.Int64ObservableGauge(MetricConcurrency, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts the host's adaptive concurrency limit allows in flight now."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// attemptKey is what the attributes of an attempt depend on.
type attemptKey struct {
	host   string // Attempt.Host, or overflowKey for hosts past the bound
	method string // normalised
	status int    // 0 without a response
	kind   kind
	class  httpretry.Class
	lost   bool
	source httpretry.DelaySource // DelayNone unless retried
	stop   httpretry.StopReason
}

type attemptOpts struct {
	count counter
	dur   []metric.RecordOption // nil for a lost attempt
	delay []metric.RecordOption // nil unless retried
}

// callKey is what the attributes of a call depend on.
type callKey struct {
	host     string
	method   string
	status   int
	stop     httpretry.StopReason
	attempts bool // the call sent at least one attempt
}

type callOpts struct {
	dur     []metric.RecordOption
	refusal *counter // nil unless a guard refused an attempt
}

// refusalKey is what the attributes of a refusal depend on.
type refusalKey struct {
	host   string
	reason string
	kind   kind
}

type kind uint8

const (
	kindFirst kind = iota
	kindRetry
	kindHedge
)

var kindNames = [...]string{"first", "retry", "hedge"}

func (m *metrics) attempt(a httpretry.Attempt) {
	ctx := context.Background()
	method := ""
	if a.Request != nil {
		ctx, method = a.Request.Context(), a.Request.Method
	}
	k := attemptKey{host: a.Host, method: normMethod(method), status: statusOf(a.Response),
		class: a.Class, lost: a.Lost, stop: a.Stop}
	switch {
	case a.Hedge:
		k.kind = kindHedge
	case a.N > 1:
		k.kind = kindRetry
	}
	if a.Retry {
		k.source = a.DelaySource
	}
	if a.Lost {
		k.class = httpretry.ClassDefault
	}
	o, kept := options(&m.attemptOpts, &m.hosts, k, m.newAttemptOpts)
	if kept {
		o.count.n.Add(1)
	} else {
		m.attemptOverflow.n.Add(1)
	}
	if o.dur != nil {
		m.attemptDur.Record(ctx, a.Duration.Seconds(), o.dur...)
	}
	if o.delay != nil {
		m.delay.Record(ctx, a.Delay.Seconds(), o.delay...)
	}
}

func (m *metrics) call(c httpretry.Call) {
	ctx := context.Background()
	method := ""
	if c.Request != nil {
		ctx, method = c.Request.Context(), c.Request.Method
	}
	k := callKey{host: c.Host, method: normMethod(method), status: statusOf(c.Response),
		stop: c.Stop, attempts: c.Attempts > 0}
	o, _ := options(&m.callOpts, &m.hosts, k, m.newCallOpts)
	m.callDur.Record(ctx, c.Duration.Seconds(), o.dur...)
	if o.refusal != nil {
		o.refusal.n.Add(1)
	}
}

// refusalReasons are the values of RefusalReason for the guards that
// refuse an attempt before it is sent.
var refusalReasons = map[httpretry.StopReason]string{
	httpretry.StopBudget:           "budget",
	httpretry.StopBreaker:          "breaker",
	httpretry.StopThrottled:        "throttle",
	httpretry.StopConcurrencyLimit: "limit",
	httpretry.StopRateLimited:      "pace",
}

// normMethod returns the method as the semantic conventions record it:
// one of the methods of RFC 9110 and PATCH, else "_OTHER".
func normMethod(m string) string {
	switch m {
	case "":
		return http.MethodGet
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}
