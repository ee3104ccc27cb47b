package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scraped runs the scripted traffic and scrapes /metrics over HTTP, as
// Prometheus would; it returns the metric families and the admin server.
func scraped(t *testing.T) (map[string]*dto.MetricFamily, *httptest.Server) {
	t.Helper()
	base, stop := upstreams()
	t.Cleanup(stop)
	reg := prometheus.NewRegistry()
	tr, err := newTransport(base, reg, policy, hosts)
	require.NoError(t, err)
	traffic(context.Background(), &http.Client{Transport: tr})

	admin := httptest.NewServer(newAdmin(reg, tr))
	t.Cleanup(admin.Close)
	resp, err := http.Get(admin.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families, admin
}

// sum adds the values of family's samples whose labels include match.
func sum(t *testing.T, families map[string]*dto.MetricFamily, family string, match map[string]string) float64 {
	t.Helper()
	f, ok := families[family]
	require.True(t, ok, "no family %s on /metrics", family)
	var total float64
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matched := true
		for k, v := range match {
			if labels[k] != v {
				matched = false
			}
		}
		if !matched {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

func TestPrometheusScrapesTheMetrics(t *testing.T) {
	t.Parallel()
	families, _ := scraped(t)
	host := func(h string, more ...string) map[string]string {
		m := map[string]string{"server_address": h}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}

	// Inventory: 503, 503, 200, then two calls that succeed at once.
	assert.Equal(t, 5.0, sum(t, families, "httpretry_attempts_total", host("inventory.example")))
	assert.Equal(t, 2.0, sum(t, families, "httpretry_attempts_total", host("inventory.example", "httpretry_attempt_kind", "retry")))
	assert.Equal(t, 3.0, sum(t, families, "httpretry_call_duration_seconds", host("inventory.example", "httpretry_stop_reason", "success")))
	assert.Equal(t, 2.0, sum(t, families, "httpretry_retry_delay_seconds", host("inventory.example", "httpretry_delay_source", "backoff")))
	assert.InDelta(t, 497.0/500, sum(t, families, "httpretry_budget_level_ratio", host("inventory.example")), 1e-9)

	// Payments: down; the breaker opens on the fifth failure in a row, in
	// the second call, which it refuses a retry; it refuses the next two
	// calls outright.
	assert.Equal(t, 2.0, sum(t, families, "httpretry_breaker_state", host("payments.example")))
	assert.Equal(t, 1.0, sum(t, families, "httpretry_refusals_total", host("payments.example", "httpretry_refusal_reason", "breaker", "httpretry_attempt_kind", "retry")))
	assert.Equal(t, 2.0, sum(t, families, "httpretry_refusals_total", host("payments.example", "httpretry_refusal_reason", "breaker", "httpretry_attempt_kind", "first")))
	assert.Equal(t, 5.0, sum(t, families, "httpretry_attempts_total", host("payments.example")))

	// Search: 429 to everything; its budget of four retries runs out in
	// the second call, and the three calls after the first are refused a
	// retry each.
	assert.Equal(t, 0.0, sum(t, families, "httpretry_budget_level_ratio", host("search.example")))
	assert.Equal(t, 3.0, sum(t, families, "httpretry_refusals_total", host("search.example", "httpretry_refusal_reason", "budget")))
	assert.Equal(t, 3.0, sum(t, families, "httpretry_attempts_total", host("search.example", "httpretry_stop_reason", "retry budget exhausted")))

	// Catalog: the first attempt hangs, the hedge sent 20 ms later wins,
	// and the first is reported lost.
	assert.Equal(t, 1.0, sum(t, families, "httpretry_attempts_total", host("catalog.example", "httpretry_attempt_kind", "hedge", "httpretry_stop_reason", "success")))
	assert.Equal(t, 1.0, sum(t, families, "httpretry_attempts_total", host("catalog.example", "httpretry_attempt_kind", "first", "httpretry_attempt_lost", "true")))

	// Every call is in the call histogram, once.
	assert.Equal(t, 12.0, sum(t, families, "httpretry_call_duration_seconds", nil))
	for _, name := range []string{"httpretry_attempts_total", "httpretry_call_duration_seconds"} {
		for _, m := range families[name].GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotContains(t, l.GetValue(), "/v1/", "no path in %s", name)
				assert.NotContains(t, l.GetValue(), "widgets", "no query in %s", name)
			}
		}
	}
}

// TestDocsNameWhatIsScraped: every metric and label that
// docs/observability.md names, in its table and its queries, is on
// /metrics after the scripted run.
func TestDocsNameWhatIsScraped(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/observability.md")
	require.NoError(t, err)
	families, _ := scraped(t)
	series := map[string]bool{}
	labels := map[string]bool{}
	for name, f := range families {
		series[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				series[name+s] = true
			}
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
	}
	labels["le"] = true // the buckets'

	var missing []string
	for _, name := range regexp.MustCompile(`\bhttpretry_[a-z_]+`).FindAllString(string(doc), -1) {
		if !series[name] && !labels[name] {
			missing = append(missing, name)
		}
	}
	for _, m := range regexp.MustCompile(`\b([a-z_]+)(?:=~?|!=)"`).FindAllStringSubmatch(string(doc), -1) {
		if !labels[m[1]] {
			missing = append(missing, m[1]+" (label)")
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "named in docs/observability.md, absent from /metrics")
}

func TestStatusPageNextToMetrics(t *testing.T) {
	t.Parallel()
	_, admin := scraped(t)
	resp, err := http.Get(admin.URL + "/debug/httpretry")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	page := string(b)
	open := strings.Index(page, "payments.example:80")
	drained := strings.Index(page, "search.example:80")
	require.True(t, open > 0 && drained > 0, "both hosts listed")
	assert.Less(t, open, drained, "the open breaker first, then the empty budget")
}

func TestMainRuns(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	require.NoError(t, run(&out, ""))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Greater(t, len(lines), 10)
	assert.Equal(t, "httpretry's series on /metrics, histograms as their _count:", lines[0])
	for _, l := range lines[1:] {
		assert.True(t, strings.HasPrefix(l, "  httpretry_"), l)
		assert.NotContains(t, l, "_bucket{")
		assert.NotContains(t, l, "otel_scope_name")
	}
	assert.Contains(t, out.String(), `httpretry_breaker_state{server_address="payments.example"} 2`)
}
