package bench

import (
	"context"
	"net/http"
	"runtime"
	"testing"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/otelhttpretry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The metrics benchmarks measure what otelhttpretry.Instrument adds to
// httpretry's success path: the same GET to one loopback server through
//
//   - client=plain: httpretry.Transport with the default policy;
//   - client=hooks: the same with empty OnAttempt and OnCall hooks, which
//     is what the Transport itself pays for being observed (it times the
//     attempts and names the host);
//   - client=metrics: the same instrumented with Instrument, recording into
//     the OpenTelemetry SDK (a MeterProvider with a manual reader, which is
//     what any exporter sits behind).
//
// case=get and case=get-parallel go through a real loopback connection;
// case=memory answers from memory with one shared response, so that what
// is left is the Transport's own cost, and the recording's, with little
// of the noise of a shared machine.
//
// The goal is ≤ 1 allocation and ≤ 5 % more than plain. Compare rounds run
// as separate processes in rotated order (docs/observability.md gives the
// command), not sub-benchmarks of one process.

// metricsClients returns the three clients, each on a fresh transport from
// newBase, and the reader of the instrumented one.
func metricsClients(tb testing.TB, newBase func() http.RoundTripper) ([]struct {
	name string
	rt   http.RoundTripper
}, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	metered := &httpretry.Transport{Base: newBase()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	if err := otelhttpretry.Instrument(metered, otelhttpretry.WithMeterProvider(mp)); err != nil {
		tb.Fatal(err)
	}
	return []struct {
		name string
		rt   http.RoundTripper
	}{
		{"plain", &httpretry.Transport{Base: newBase()}},
		{"hooks", &httpretry.Transport{Base: newBase(), OnAttempt: func(httpretry.Attempt) {}, OnCall: func(httpretry.Call) {}}},
		{"metrics", metered},
	}, reader
}

func loopback() http.RoundTripper { return newBare() }

// inMemory answers every request with the same response, allocating
// nothing.
func inMemory() http.RoundTripper {
	shared := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}
	return roundTripFunc(func(*http.Request) (*http.Response, error) { return shared, nil })
}

// BenchmarkMetricsOverhead is the success-path cost of each client, for a
// GET from one goroutine and from GOMAXPROCS goroutines over loopback, and
// for a GET answered from memory.
func BenchmarkMetricsOverhead(b *testing.B) {
	srv := newOverheadServer(b)
	clients, _ := metricsClients(b, loopback)
	for _, cl := range clients {
		b.Run("case=get/client="+cl.name, func(b *testing.B) {
			b.ReportAllocs()
			runtime.GC()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			for b.Loop() {
				roundTrip(b, cl.rt, req)
			}
		})
	}
	for _, cl := range clients {
		b.Run("case=get-parallel/client="+cl.name, func(b *testing.B) {
			b.ReportAllocs()
			runtime.GC()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				for pb.Next() {
					roundTrip(b, cl.rt, req)
				}
			})
		})
	}
	memory, _ := metricsClients(b, inMemory)
	for _, cl := range memory {
		b.Run("case=memory/client="+cl.name, func(b *testing.B) {
			b.ReportAllocs()
			req, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1/items", nil)
			for b.Loop() {
				roundTrip(b, cl.rt, req)
			}
		})
	}
}

// TestMetricsClientsWork sends one request through each client and checks
// that the instrumented one recorded it: the benchmark measures a working
// configuration.
func TestMetricsClientsWork(t *testing.T) {
	srv := newOverheadServer(t)
	clients, reader := metricsClients(t, loopback)
	for _, cl := range clients {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		roundTrip(t, cl.rt, req)
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	var attempts int64
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == otelhttpretry.MetricAttempts {
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				attempts += p.Value
			}
		}
	}
	assert.Equal(t, int64(1), attempts, "the instrumented client's one attempt, and only it")
}
