package otelhttpretry_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/seedhq/httpretry/otelhttpretry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// instrumented returns t instrumented with a MeterProvider whose manual
// reader the returned function collects: each point as
// "name{attributes}", histograms as name_count and name_sum.
//
// tr is kept reachable until the test ends. Instrument holds it weakly and
// its metrics end with it, and a test typically stops using tr before its
// last collection; without this, a garbage collection in between (one run
// in a hundred or so, more with GOGC=1) would take their series away. A
// program's Transport stays reachable through the client that sends with
// it.
func instrumented(t *testing.T, tr *httpretry.Transport) func() map[string]float64 {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	require.NoError(t, otelhttpretry.Instrument(tr, otelhttpretry.WithMeterProvider(mp)))
	t.Cleanup(func() { runtime.KeepAlive(tr) })
	return func() map[string]float64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		return flatten(rm)
	}
}

func flatten(rm metricdata.ResourceMetrics) map[string]float64 {
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		return name + "{" + set.Encoded(attribute.DefaultEncoder()) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name+"_count", p.Attributes)] = float64(p.Count)
					out[key(m.Name+"_sum", p.Attributes)] = p.Sum
				}
			default:
				panic(fmt.Sprintf("%s: unexpected %T", m.Name, m.Data))
			}
		}
	}
	return out
}

// only keeps the points of the named metric.
func only(points map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range points {
		if strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}

func send(t *testing.T, tr *httpretry.Transport, method, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

const host = "server.address=api.example.com"

// key names a point as flatten does: attributes given as "k=v" (host may
// hold two), in any order.
func key(name string, attrs ...string) string {
	var all []string
	for _, a := range attrs {
		all = append(all, strings.Split(a, ",")...)
	}
	sort.Strings(all)
	return name + "{" + strings.Join(all, ",") + "}"
}

// TestMetricsOfARetriedCall: 503, 503, 200 gives three attempts, two
// retries waited for, one call, and a budget that lent one retry's cost.
func TestMetricsOfARetriedCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(503), httpretrytest.Respond(200, "ok"))
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{Backoff: backoff.Constant(100 * time.Millisecond)}}
		collect := instrumented(t, tr)
		send(t, tr, http.MethodGet, "https://api.example.com/v1/items?id=42")

		got := collect()
		assert.Equal(t, map[string]float64{
			key("httpretry.attempts", "http.request.method=GET", "http.response.status_code=503", "httpretry.attempt.class=transient", "httpretry.attempt.kind=first", "httpretry.delay.source=backoff", host): 1,
			key("httpretry.attempts", "http.request.method=GET", "http.response.status_code=503", "httpretry.attempt.class=transient", "httpretry.attempt.kind=retry", "httpretry.delay.source=backoff", host): 1,
			key("httpretry.attempts", "http.request.method=GET", "http.response.status_code=200", "httpretry.attempt.class=success", "httpretry.attempt.kind=retry", host, "httpretry.stop.reason=success"):    1,
		}, only(got, "httpretry.attempts"))
		assert.Equal(t, map[string]float64{
			key("httpretry.retry.delay_count", "httpretry.delay.source=backoff", host): 2,
			key("httpretry.retry.delay_sum", "httpretry.delay.source=backoff", host):   0.2,
		}, only2(got, "httpretry.retry.delay"))
		assert.Equal(t, map[string]float64{
			key("httpretry.call.duration_count", "http.request.method=GET", "http.response.status_code=200", host, "httpretry.stop.reason=success"): 1,
			key("httpretry.call.duration_sum", "http.request.method=GET", "http.response.status_code=200", host, "httpretry.stop.reason=success"):   0.2,
		}, only2(got, "httpretry.call.duration"), "the call lasted its two waits: the upstream answers at once")
		assert.Equal(t, map[string]float64{
			key("httpretry.attempt.duration_count", "http.request.method=GET", "httpretry.attempt.class=transient", "httpretry.attempt.kind=first", host): 1,
			key("httpretry.attempt.duration_sum", "http.request.method=GET", "httpretry.attempt.class=transient", "httpretry.attempt.kind=first", host):   0,
			key("httpretry.attempt.duration_count", "http.request.method=GET", "httpretry.attempt.class=transient", "httpretry.attempt.kind=retry", host): 1,
			key("httpretry.attempt.duration_sum", "http.request.method=GET", "httpretry.attempt.class=transient", "httpretry.attempt.kind=retry", host):   0,
			key("httpretry.attempt.duration_count", "http.request.method=GET", "httpretry.attempt.class=success", "httpretry.attempt.kind=retry", host):   1,
			key("httpretry.attempt.duration_sum", "http.request.method=GET", "httpretry.attempt.class=success", "httpretry.attempt.kind=retry", host):     0,
		}, only2(got, "httpretry.attempt.duration"))
		assert.Equal(t, map[string]float64{
			// Two retries took 5 tokens each; the success gave the last back.
			key("httpretry.budget.level", host): 495.0 / 500,
		}, only(got, "httpretry.budget.level"))
		assert.Empty(t, only(got, "httpretry.breaker.state"), "no breaker configured")
		assert.Empty(t, only(got, "httpretry.refusals"))
	})
}

// only2 keeps the _count and _sum points of a histogram.
func only2(points map[string]float64, name string) map[string]float64 {
	out := only(points, name+"_count")
	for k, v := range only(points, name+"_sum") {
		out[k] = v
	}
	return out
}

// TestMetricsOfADrainedBudget: a bucket with room for two retries is
// drained by the first call; from then on every call is refused its retry.
func TestMetricsOfADrainedBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{
			Backoff: backoff.Constant(0),
			NewBudget: func(string) httpretry.Budget {
				return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 5})
			},
		}}
		collect := instrumented(t, tr)
		for range 3 {
			send(t, tr, http.MethodPost, "https://api.example.com/v1/charges")
		}
		assert.Len(t, upstream.Requests(), 5, "3, then 1 and 1")

		got := collect()
		assert.Equal(t, map[string]float64{
			key("httpretry.refusals", "httpretry.attempt.kind=retry", "httpretry.refusal.reason=budget", host): 3,
		}, only(got, "httpretry.refusals"))
		assert.Equal(t, map[string]float64{
			key("httpretry.budget.level", host): 0,
		}, only(got, "httpretry.budget.level"))
		attempt := func(kind string, more ...string) string {
			return key("httpretry.attempts", append(more, "http.request.method=POST", "http.response.status_code=503",
				"httpretry.attempt.class=transient", "httpretry.attempt.kind="+kind, host)...)
		}
		assert.Equal(t, map[string]float64{
			attempt("first", "httpretry.delay.source=backoff"):               1,
			attempt("retry", "httpretry.delay.source=backoff"):               1,
			attempt("retry", "httpretry.stop.reason=retry budget exhausted"): 1,
			attempt("first", "httpretry.stop.reason=retry budget exhausted"): 2,
		}, only(got, "httpretry.attempts"))
		assert.Equal(t, float64(3), got[key("httpretry.call.duration_count", "http.request.method=POST", "http.response.status_code=503", host, "httpretry.stop.reason=retry budget exhausted")])
	})
}

// TestMetricsOfAnOpenBreaker: the breaker opens on the third failure in a
// row, in the middle of a call, which is refused its retry; the next call
// is refused its first attempt.
func TestMetricsOfAnOpenBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(503))
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{
			Backoff:   backoff.Constant(0),
			NewBudget: httpretry.NoBudget,
			Breaker:   httpretry.BreakerPolicy{ConsecutiveFailures: 3, OpenFor: time.Minute},
		}}
		collect := instrumented(t, tr)
		send(t, tr, http.MethodGet, "https://api.example.com/v1/items")
		send(t, tr, http.MethodGet, "https://api.example.com/v1/items")
		assert.Len(t, upstream.Requests(), 3, "the second call sent nothing")

		got := collect()
		assert.Equal(t, map[string]float64{
			key("httpretry.refusals", "httpretry.attempt.kind=retry", "httpretry.refusal.reason=breaker", host): 1,
			key("httpretry.refusals", "httpretry.attempt.kind=first", "httpretry.refusal.reason=breaker", host): 1,
		}, only(got, "httpretry.refusals"))
		assert.Equal(t, map[string]float64{
			key("httpretry.breaker.state", host): float64(httpretry.BreakerOpen),
		}, only(got, "httpretry.breaker.state"))
		assert.Empty(t, only(got, "httpretry.budget.level"), "no budget")
		assert.Equal(t, float64(1), got[key("httpretry.call.duration_count", "http.request.method=GET", host, "httpretry.stop.reason=circuit breaker open")],
			"the refused call has no status")

		time.Sleep(time.Minute + time.Second) // OpenFor passes: the breaker lets a trial through
		assert.Equal(t, float64(httpretry.BreakerHalfOpen), collect()[key("httpretry.breaker.state", host)])
	})
}

// TestMetricsOfOverloadControls: an attempt the concurrency limit refuses
// is a refusal of reason "limit", and the controls' state is observed per
// host.
func TestMetricsOfOverloadControls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Status(200).After(time.Second))
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{
			Overload: httpretry.OverloadPolicy{Throttle: true, Limit: true, LimitMax: 1, LimitQueue: -1},
		}}
		collect := instrumented(t, tr)
		done := make(chan struct{})
		go func() {
			send(t, tr, http.MethodGet, "https://api.example.com/v1/items")
			close(done)
		}()
		synctest.Wait() // the first call holds the only slot
		send(t, tr, http.MethodGet, "https://api.example.com/v1/items")
		<-done
		assert.Len(t, upstream.Requests(), 1, "the second call sent nothing")

		got := collect()
		assert.Equal(t, map[string]float64{
			key("httpretry.refusals", "httpretry.attempt.kind=first", "httpretry.refusal.reason=limit", host): 1,
		}, only(got, "httpretry.refusals"))
		assert.Equal(t, map[string]float64{key("httpretry.concurrency.limit", host): 1}, only(got, "httpretry.concurrency.limit"))
		assert.Equal(t, map[string]float64{key("httpretry.throttle.probability", host): 0}, only(got, "httpretry.throttle.probability"))
	})
}

// TestMetricsOfHedges: the first attempt is slow, the hedge wins, and the
// first is reported lost.
func TestMetricsOfHedges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		upstream := httpretrytest.NewScript(httpretrytest.Respond(200, "slow").After(time.Second), httpretrytest.Respond(200, "fast"))
		tr := &httpretry.Transport{Base: upstream, Policy: httpretry.Policy{Hedge: httpretry.HedgePolicy{Delay: 100 * time.Millisecond}}}
		collect := instrumented(t, tr)
		send(t, tr, http.MethodGet, "https://api.example.com/v1/search")
		synctest.Wait() // the lost attempt is reaped

		got := collect()
		assert.Equal(t, map[string]float64{
			key("httpretry.attempts", "http.request.method=GET", "http.response.status_code=200", "httpretry.attempt.class=success", "httpretry.attempt.kind=hedge", host, "httpretry.stop.reason=success"): 1,
			key("httpretry.attempts", "http.request.method=GET", "httpretry.attempt.kind=first", "httpretry.attempt.lost=true", host):                                                                       1,
		}, only(got, "httpretry.attempts"))
		assert.Equal(t, map[string]float64{
			key("httpretry.attempt.duration_count", "http.request.method=GET", "httpretry.attempt.class=success", "httpretry.attempt.kind=hedge", host): 1,
			key("httpretry.attempt.duration_sum", "http.request.method=GET", "httpretry.attempt.class=success", "httpretry.attempt.kind=hedge", host):   0,
		}, only2(got, "httpretry.attempt.duration"), "a lost attempt's duration is cut short: not recorded")
		assert.Equal(t, 0.1, got[key("httpretry.call.duration_sum", "http.request.method=GET", "http.response.status_code=200", host, "httpretry.stop.reason=success")])
	})
}

// TestMetricsAttributesAreBounded: unknown methods are "_OTHER", hosts
// past the hundredth share server.address "_OTHER", and no path, query or
// key reaches an attribute.
func TestMetricsAttributesAreBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		down := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Body: http.NoBody, Request: req}, nil
		})
		tr := &httpretry.Transport{Base: down, Policy: httpretry.Policy{MaxAttempts: 1}}
		collect := instrumented(t, tr)
		for i := range 150 {
			send(t, tr, "PROPFIND", fmt.Sprintf("https://h%03d.example.com/secret/path?token=abc", i))
		}
		send(t, tr, http.MethodPost, "https://h000.example.com/v1/charges")

		got := collect()
		hosts := map[string]float64{}
		for k, v := range only(got, "httpretry.attempts") {
			assert.NotContains(t, k, "secret")
			assert.NotContains(t, k, "token")
			assert.NotContains(t, k, "Idempotency", "no key")
			assert.NotContains(t, k, "PROPFIND")
			i := strings.Index(k, "server.address=")
			hosts[strings.TrimSuffix(strings.SplitN(k[i+len("server.address="):], ",", 2)[0], "}")] += v
		}
		assert.Len(t, hosts, 101, "100 hosts and _OTHER")
		assert.Equal(t, float64(50), hosts["_OTHER"])
		assert.Equal(t, float64(2), hosts["h000.example.com"])
		assert.Equal(t, float64(50), got[key("httpretry.attempts", "http.request.method=_OTHER", "http.response.status_code=503",
			"httpretry.attempt.class=transient", "httpretry.attempt.kind=first", "server.address=_OTHER", "httpretry.stop.reason=request not replayable")],
			"in %v", keysWith(got, "server.address=_OTHER"))

		levels := only(got, "httpretry.budget.level")
		assert.Len(t, levels, 101, "a gauge per host, and one for the others")
		_, ok := levels[key("httpretry.budget.level", "server.address=_OTHER")]
		assert.True(t, ok)
	})
}

// TestMetricsOtherHostsReportTheirWorst: the gauges of the hosts past the
// hundredth are one series, server.address "_OTHER", and it reports the
// worst of them: the lowest budget level among those hosts.
func TestMetricsOtherHostsReportTheirWorst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		down := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Body: http.NoBody, Request: req}, nil
		})
		tr := &httpretry.Transport{Base: down, Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0)}}
		collect := instrumented(t, tr)
		for i := range 120 {
			send(t, tr, http.MethodGet, fmt.Sprintf("https://h%03d.example.com/", i))
		}
		for range 5 { // h110 spends more of its budget than any other host
			send(t, tr, http.MethodGet, "https://h110.example.com/")
		}
		worst := 1.0
		for _, s := range tr.Stats() {
			var i int
			fmt.Sscanf(s.Host, "h%03d.", &i)
			if i >= 100 && s.Budget != nil && s.Budget.Capacity > 0 {
				worst = min(worst, s.Budget.Available/s.Budget.Capacity)
			}
		}
		require.Less(t, worst, 1.0, "h110's budget was spent")
		levels := only(collect(), "httpretry.budget.level")
		assert.InDelta(t, worst, levels[key("httpretry.budget.level", "server.address=_OTHER")], 1e-9,
			"_OTHER reports the lowest level among the hosts past the hundredth")
	})
}

// TestMetricsServerPort: server.port is left out for 80 and 443, as the
// conventions allow for a scheme's default, and kept for any other.
func TestMetricsServerPort(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Respond(200, "ok"))}
		collect := instrumented(t, tr)
		for _, url := range []string{"https://api.example.com/", "http://api.example.com/", "https://api.example.com:8443/", "http://[::1]:8080/"} {
			send(t, tr, http.MethodGet, url)
		}
		calls := map[string]float64{}
		for k, v := range only2(collect(), "httpretry.call.duration") {
			if strings.HasPrefix(k, "httpretry.call.duration_count") {
				calls[k] = v
			}
		}
		const rest = "http.request.method=GET,http.response.status_code=200,httpretry.stop.reason=success"
		assert.Equal(t, map[string]float64{
			key("httpretry.call.duration_count", rest, "server.address=api.example.com"):                     2,
			key("httpretry.call.duration_count", rest, "server.address=api.example.com", "server.port=8443"): 1,
			key("httpretry.call.duration_count", rest, "server.address=::1", "server.port=8080"):             1,
		}, calls)
	})
}

// TestInstrumentKeepsHooks: hooks set before Instrument still run, first.
func TestInstrumentKeepsHooks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var log httpretrytest.AttemptLog
		var calls []httpretry.Call
		tr := &httpretry.Transport{
			Base:      httpretrytest.NewScript(httpretrytest.Status(503), httpretrytest.Status(200)),
			Policy:    httpretry.Policy{Backoff: backoff.Constant(0)},
			OnAttempt: log.Record,
			OnCall:    func(c httpretry.Call) { calls = append(calls, c) },
		}
		collect := instrumented(t, tr)
		send(t, tr, http.MethodGet, "https://api.example.com/")

		assert.Len(t, log.Attempts(), 2)
		require.Len(t, calls, 1)
		assert.Equal(t, 2, calls[0].Attempts)
		var n float64
		for _, v := range only(collect(), "httpretry.attempts") {
			n += v
		}
		assert.Equal(t, float64(2), n)
	})
}

func TestInstrumentNil(t *testing.T) {
	t.Parallel()
	assert.Error(t, otelhttpretry.Instrument(nil))
}

// TestGaugesEndWithTheTransport: the callback reading Stats holds the
// Transport weakly; once it is collected, nothing is observed.
func TestGaugesEndWithTheTransport(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	collect := func() map[string]float64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		return flatten(rm)
	}
	func() {
		tr := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)),
			Policy: httpretry.Policy{MaxAttempts: 1}}
		require.NoError(t, otelhttpretry.Instrument(tr, otelhttpretry.WithMeterProvider(mp)))
		send(t, tr, http.MethodGet, "https://api.example.com/")
		require.Len(t, only(collect(), "httpretry.budget.level"), 1)
		runtime.KeepAlive(tr) // in use up to here: collected after, not before
	}()
	runtime.GC()
	assert.Empty(t, only(collect(), "httpretry.budget.level"))
}

// TestCountersOutliveTheTransport: the counters are cumulative; when one
// of two Transports recording to one MeterProvider is collected, what it
// counted stays counted, so that a counter never goes backwards (which a
// backend reads as a reset, losing what was counted since its last
// export). Only the gauges, which describe a live Transport, end with it.
func TestCountersOutliveTheTransport(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	attempts := func() float64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		sum := 0.0
		for _, v := range only(flatten(rm), "httpretry.attempts") {
			sum += v
		}
		return sum
	}
	kept := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)), Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0)}}
	require.NoError(t, otelhttpretry.Instrument(kept, otelhttpretry.WithMeterProvider(mp)))
	send(t, kept, http.MethodGet, "https://api.example.com/")
	func() {
		dropped := &httpretry.Transport{Base: httpretrytest.NewScript(httpretrytest.Status(503)), Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0)}}
		require.NoError(t, otelhttpretry.Instrument(dropped, otelhttpretry.WithMeterProvider(mp)))
		send(t, dropped, http.MethodGet, "https://api.example.com/")
		runtime.KeepAlive(dropped)
	}()
	require.Equal(t, 4.0, attempts())
	runtime.GC()
	runtime.GC()
	assert.Equal(t, 4.0, attempts(), "the collected Transport's attempts stay counted")
	runtime.KeepAlive(kept)
}

// TestNoAllocationPerCall: once a combination of attributes has been
// seen, recording its attempt and call allocates nothing. The Transport
// itself allocates one string per call to name the host for its hooks.
func TestNoAllocationPerCall(t *testing.T) {
	shared := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}
	free := httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return shared, nil })
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	allocs := func(tr *httpretry.Transport) float64 {
		tr.RoundTrip(req)
		return testing.AllocsPerRun(1000, func() {
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := allocs(&httpretry.Transport{Base: free})
	hooked := allocs(&httpretry.Transport{Base: free, OnAttempt: func(httpretry.Attempt) {}, OnCall: func(httpretry.Call) {}})
	tr := &httpretry.Transport{Base: free}
	reader := sdkmetric.NewManualReader()
	require.NoError(t, otelhttpretry.Instrument(tr, otelhttpretry.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))))
	metered := allocs(tr)
	t.Logf("allocations per call: %v plain, %v with empty hooks, %v with metrics", plain, hooked, metered)
	assert.Equal(t, hooked, metered, "recording allocates nothing")
	assert.LessOrEqual(t, metered-plain, 1.0)
}

// keysWith lists the keys of points that contain s, for failure messages.
func keysWith(points map[string]float64, s string) []string {
	var keys []string
	for k := range points {
		if strings.Contains(k, s) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// levelBudget is a Budget of the user's that allows every retry and
// reports a fixed level, such as +Inf for "unlimited".
type levelBudget struct{ available, capacity float64 }

func (levelBudget) Begin()                      {}
func (levelBudget) AllowRetry(bool) bool        { return true }
func (levelBudget) Refund(bool)                 {}
func (levelBudget) Succeeded(bool, bool)        {}
func (b levelBudget) Level() (float64, float64) { return b.available, b.capacity }

// TestBudgetGaugeSkipsNonFiniteLevels: a budget whose level makes no
// share (+Inf or NaN available or capacity) is not observed, neither on
// its own series nor in the worst of "_OTHER": the gauge never reports
// NaN, nor a level of 0 or 1 that the budget did not say.
func TestBudgetGaugeSkipsNonFiniteLevels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		levels := map[string]levelBudget{
			"inf":     {math.Inf(1), math.Inf(1)},
			"nan":     {math.NaN(), 500},
			"infcap":  {250, math.Inf(1)},
			"neginf":  {math.Inf(-1), 500},
			"quarter": {125, 500},
			"tenth":   {50, 500},
		}
		down := httpretrytest.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Body: http.NoBody, Request: req}, nil
		})
		tr := &httpretry.Transport{Base: down, Policy: httpretry.Policy{MaxAttempts: 2, Backoff: backoff.Constant(0),
			NewBudget: func(host string) httpretry.Budget {
				name, _, _ := strings.Cut(host, ".")
				if b, ok := levels[strings.TrimRight(name, "0123456789")]; ok {
					return b
				}
				return levels["quarter"]
			}}}
		collect := instrumented(t, tr)
		for _, name := range []string{"inf", "nan", "infcap", "neginf", "quarter"} {
			send(t, tr, http.MethodGet, "https://"+name+".example.com/")
		}
		for i := range 100 { // past the bound: reported together as _OTHER
			send(t, tr, http.MethodGet, fmt.Sprintf("https://h%03d.example.com/", i))
		}
		for _, name := range []string{"inf1", "nan1", "infcap1", "neginf1", "tenth1"} {
			send(t, tr, http.MethodGet, "https://"+name+".example.com/")
		}

		got := only(collect(), "httpretry.budget.level")
		for k, v := range got {
			assert.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s = %v", k, v)
		}
		for _, name := range []string{"inf", "nan", "infcap", "neginf"} {
			_, ok := got[key("httpretry.budget.level", "server.address="+name+".example.com")]
			assert.False(t, ok, "%s: no share, no point", name)
		}
		assert.Equal(t, 0.25, got[key("httpretry.budget.level", "server.address=quarter.example.com")])
		assert.Equal(t, 0.1, got[key("httpretry.budget.level", "server.address=_OTHER")], "the worst finite level among the others")
	})
}
