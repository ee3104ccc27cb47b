package httpretry

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// StatusHandler returns an http.Handler that shows the per-host state of t
// (see Transport.Stats) as a page an operator can read: one row per host,
// hosts in trouble first — open breakers, then half-open ones, then the
// emptiest budgets, then the most recent failures. The query
// ?format=json gives the same rows as JSON, for machines; ?refresh=N
// reloads the page every N seconds (1 to 3600), without JavaScript.
//
// The page is plain HTML with no script, and escapes every value: host
// names come from the URLs the process was asked to fetch. It serves GET
// and HEAD. It lists the hosts the process talks to, so mount it where
// only operators reach it, as one would net/http/pprof.
func StatusHandler(t *Transport) http.Handler {
	return statusHandler{t}
}

type statusHandler struct{ t *Transport }

func (h statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	format := q.Get("format")
	if format != "" && format != "html" && format != "json" {
		http.Error(w, "unknown format: use html or json", http.StatusBadRequest)
		return
	}
	refresh := 0
	if v := q.Get("refresh"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			http.Error(w, "refresh: seconds from 1 to 3600", http.StatusBadRequest)
			return
		}
		refresh = n
	}
	stats := h.t.Stats()
	slices.SortFunc(stats, troubleFirst)
	now := time.Now()

	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if format == "json" {
		hdr.Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(statusJSON(stats, now))
		return
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	_ = statusPage.Execute(w, statusView(stats, now, refresh))
}

// troubleFirst orders hosts for the page: open breakers, then half-open,
// then the lowest budget level, then the most recent failure, then by
// name.
func troubleFirst(a, b HostStats) int {
	if c := cmp.Compare(breakerRank(b), breakerRank(a)); c != 0 {
		return c
	}
	if c := cmp.Compare(budgetLevel(a), budgetLevel(b)); c != 0 {
		return c
	}
	if c := b.LastFailureAt.Compare(a.LastFailureAt); c != 0 {
		return c
	}
	return cmp.Compare(a.Host, b.Host)
}

func breakerRank(s HostStats) int {
	if !s.HasBreaker {
		return 0
	}
	switch s.BreakerState {
	case BreakerOpen:
		return 2
	case BreakerHalfOpen:
		return 1
	}
	return 0
}

// budgetLevel is the share of the budget available, 1 for a host without
// a budget that reports its level.
func budgetLevel(s HostStats) float64 {
	if !s.HasBudget || s.BudgetCapacity <= 0 {
		return 1
	}
	return min(max(s.BudgetAvailable/s.BudgetCapacity, 0), 1)
}

// lowBudget is the level under which the page marks a budget.
const lowBudget = 0.2

// statusRow is one host as the page shows it.
type statusRow struct {
	Host string

	HasBreaker     bool
	Breaker        string // "open", "half-open", "closed"
	BreakerDetail  string
	BreakerRefused int64

	HasBudget     bool
	HasLevel      bool
	Available     string
	Capacity      string
	Low, High     string // the meter's thresholds
	Level         string // "99 %"
	LowBudget     bool
	BudgetRefused int64

	Attempts   int64
	Retries    int64
	RetryShare string

	LastFailure    string
	LastFailureAgo string
	LastFailureAt  string
	LastUsedAgo    string
	LastUsedAt     string
}

type statusPageData struct {
	Generated   string
	Refresh     int
	Hosts       int
	Open        int
	HalfOpen    int
	LowBudgets  int
	LowBudgetAt string
	Rows        []statusRow
}

func statusView(stats []HostStats, now time.Time, refresh int) statusPageData {
	d := statusPageData{
		Generated:   now.UTC().Format(time.RFC3339),
		Refresh:     refresh,
		Hosts:       len(stats),
		LowBudgetAt: fmt.Sprintf("%.0f %%", lowBudget*100),
		Rows:        make([]statusRow, 0, len(stats)),
	}
	for _, s := range stats {
		r := statusRow{Host: s.Host, Attempts: s.Attempts, Retries: s.Retries}
		if s.HasBreaker {
			r.HasBreaker, r.Breaker, r.BreakerRefused = true, s.BreakerState.String(), s.BreakerRefusals
			// A breaker starts counting afresh at each change of state:
			// the counts of an open one are empty.
			switch s.BreakerState {
			case BreakerOpen:
				d.Open++
			case BreakerHalfOpen:
				d.HalfOpen++
				r.BreakerDetail = fmt.Sprintf("%d trial attempts succeeded", s.BreakerSuccesses)
			default:
				r.BreakerDetail = fmt.Sprintf("%d failed, %d succeeded in the window; %d in a row",
					s.BreakerFailures, s.BreakerSuccesses, s.ConsecutiveFailures)
			}
		}
		if s.HasBudget {
			r.HasBudget, r.BudgetRefused = true, s.BudgetRefusals
			if s.BudgetCapacity > 0 {
				level := budgetLevel(s)
				r.HasLevel = true
				r.Available, r.Capacity = number(s.BudgetAvailable), number(s.BudgetCapacity)
				r.Low, r.High = number(s.BudgetCapacity*lowBudget), number(s.BudgetCapacity/2)
				r.Level = fmt.Sprintf("%.0f %%", level*100)
				if level < lowBudget {
					r.LowBudget = true
					d.LowBudgets++
				}
			}
		}
		if s.Attempts > 0 {
			r.RetryShare = fmt.Sprintf("%.0f %%", float64(s.Retries)/float64(s.Attempts)*100)
		}
		if !s.LastFailureAt.IsZero() {
			r.LastFailure = s.LastFailure.String()
			r.LastFailureAgo, r.LastFailureAt = ago(now, s.LastFailureAt), s.LastFailureAt.UTC().Format(time.RFC3339)
		}
		if !s.LastUsed.IsZero() {
			r.LastUsedAgo, r.LastUsedAt = ago(now, s.LastUsed), s.LastUsed.UTC().Format(time.RFC3339)
		}
		d.Rows = append(d.Rows, r)
	}
	return d
}

func number(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }

// ago says how long before now t was, to the second.
func ago(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d <= 0 {
		return "now"
	}
	return d.String() + " ago"
}

// The JSON form: the fields of HostStats, with states and classes by
// name and the sub-objects of a mechanism the host does not have left
// out.
type (
	statusDoc struct {
		GeneratedAt time.Time    `json:"generated_at"`
		Hosts       []statusHost `json:"hosts"`
	}
	statusHost struct {
		Host        string          `json:"host"`
		Breaker     *statusBreaker  `json:"breaker,omitempty"`
		Budget      *statusBudget   `json:"budget,omitempty"`
		Attempts    int64           `json:"attempts"`
		Retries     int64           `json:"retries"`
		Hedging     *statusHedging  `json:"hedging,omitempty"`
		Throttle    *statusThrottle `json:"throttle,omitempty"`
		Limit       *statusLimit    `json:"concurrency_limit,omitempty"`
		Pacing      *statusPacing   `json:"pacing,omitempty"`
		LastFailure *statusFailure  `json:"last_failure,omitempty"`
		LastUsed    time.Time       `json:"last_used"`
	}
	statusHedging struct {
		Tokens   float64 `json:"tokens"`
		Refusals int64   `json:"refusals"`
		Samples  int     `json:"samples"`
		P50      string  `json:"p50,omitempty"`
		P95      string  `json:"p95,omitempty"`
		P99      string  `json:"p99,omitempty"`
		Delay    string  `json:"delay,omitempty"`
	}
	statusThrottle struct {
		Probability float64 `json:"probability"`
		Refusals    int64   `json:"refusals"`
	}
	statusLimit struct {
		Limit    int   `json:"limit"`
		InFlight int   `json:"in_flight"`
		Waiting  int   `json:"waiting"`
		Refusals int64 `json:"refusals"`
	}
	statusPacing struct {
		Until     *time.Time `json:"until,omitempty"`
		Remaining *int64     `json:"remaining,omitempty"`
		Refusals  int64      `json:"refusals"`
	}
	statusBreaker struct {
		State               string `json:"state"`
		Failures            uint32 `json:"failures"`
		Successes           uint32 `json:"successes"`
		ConsecutiveFailures uint32 `json:"consecutive_failures"`
		Refusals            int64  `json:"refusals"`
	}
	statusBudget struct {
		Available *float64 `json:"available,omitempty"`
		Capacity  *float64 `json:"capacity,omitempty"`
		Level     *float64 `json:"level,omitempty"`
		Refusals  int64    `json:"refusals"`
	}
	statusFailure struct {
		Class string    `json:"class"`
		At    time.Time `json:"at"`
	}
)

func statusJSON(stats []HostStats, now time.Time) statusDoc {
	doc := statusDoc{GeneratedAt: now.UTC(), Hosts: make([]statusHost, 0, len(stats))}
	for _, s := range stats {
		h := statusHost{Host: s.Host, Attempts: s.Attempts, Retries: s.Retries, LastUsed: s.LastUsed.UTC()}
		if s.HasBreaker {
			h.Breaker = &statusBreaker{State: s.BreakerState.String(), Failures: s.BreakerFailures,
				Successes: s.BreakerSuccesses, ConsecutiveFailures: s.ConsecutiveFailures, Refusals: s.BreakerRefusals}
		}
		if s.HasBudget {
			h.Budget = &statusBudget{Refusals: s.BudgetRefusals}
			if s.BudgetCapacity > 0 {
				available, capacity, level := s.BudgetAvailable, s.BudgetCapacity, budgetLevel(s)
				h.Budget.Available, h.Budget.Capacity, h.Budget.Level = &available, &capacity, &level
			}
		}
		if s.HasHedgeBudget {
			h.Hedging = &statusHedging{Tokens: s.HedgeTokens, Refusals: s.HedgeRefusals, Samples: s.LatencySamples}
			if s.LatencySamples > 0 {
				h.Hedging.P50, h.Hedging.P95, h.Hedging.P99 = s.LatencyP50.String(), s.LatencyP95.String(), s.LatencyP99.String()
			}
			if s.HedgeDelay > 0 {
				h.Hedging.Delay = s.HedgeDelay.String()
			}
		}
		if s.HasThrottle {
			h.Throttle = &statusThrottle{Probability: s.ThrottleProbability, Refusals: s.ThrottleRefusals}
		}
		if s.HasLimit {
			h.Limit = &statusLimit{Limit: s.Limit, InFlight: s.InFlight, Waiting: s.Waiting, Refusals: s.LimitRefusals}
		}
		if s.HasPacing {
			h.Pacing = &statusPacing{Refusals: s.PaceRefusals}
			if !s.PacedUntil.IsZero() {
				until, left := s.PacedUntil.UTC(), s.PaceRemaining
				h.Pacing.Until, h.Pacing.Remaining = &until, &left
			}
		}
		if !s.LastFailureAt.IsZero() {
			h.LastFailure = &statusFailure{Class: s.LastFailure.String(), At: s.LastFailureAt.UTC()}
		}
		doc.Hosts = append(doc.Hosts, h)
	}
	return doc
}

var statusPage = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">
{{end}}<title>httpretry: per-host state</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #1b1f24; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
p.summary { margin: 0 0 1em; color: #444; }
p.summary b.open { color: #b42318; }
p.summary b.half-open, p.summary b.low { color: #9a5b00; }
table { border-collapse: collapse; min-width: 60em; }
th, td { border-bottom: 1px solid #d8dee4; padding: .35em .7em; text-align: left; vertical-align: top; }
th { background: #f3f5f7; font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.host { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; word-break: break-all; }
tr.open td { background: #fdecea; }
tr.half-open td { background: #fff6e0; }
.state { display: inline-block; min-width: 5.5em; padding: 0 .4em; border-radius: 3px; font-weight: 600; text-align: center; }
.state.open { background: #b42318; color: #fff; }
.state.half-open { background: #f0a92c; color: #1b1f24; }
.state.closed { background: #2f7d32; color: #fff; }
.detail { color: #57606a; font-size: .9em; }
.low { color: #9a5b00; font-weight: 600; }
meter { width: 7em; vertical-align: middle; }
.none { color: #8c959f; }
p.note { color: #57606a; font-size: .9em; max-width: 60em; }
</style>
</head>
<body>
<h1>httpretry: per-host state</h1>
<p class="summary">{{.Hosts}} host{{if ne .Hosts 1}}s{{end}} with state ·
<b class="open">{{.Open}} open</b> ·
<b class="half-open">{{.HalfOpen}} half-open</b> ·
<b class="low">{{.LowBudgets}} budget{{if ne .LowBudgets 1}}s{{end}} below {{.LowBudgetAt}}</b> ·
generated {{.Generated}} · <a href="?format=json">JSON</a></p>
<table>
<thead><tr>
<th>Host</th><th>Breaker</th><th>Retry budget</th><th>Refused</th>
<th>Attempts</th><th>Retries</th><th>Last failure</th><th>Last used</th>
</tr></thead>
<tbody>
{{range .Rows}}<tr class="{{.Breaker}}">
<td class="host">{{.Host}}</td>
<td>{{if .HasBreaker}}<span class="state {{.Breaker}}">{{.Breaker}}</span>{{with .BreakerDetail}}<br><span class="detail">{{.}}</span>{{end}}{{else}}<span class="none">none</span>{{end}}</td>
<td>{{if .HasLevel}}<meter min="0" max="{{.Capacity}}" low="{{.Low}}" high="{{.High}}" optimum="{{.Capacity}}" value="{{.Available}}">{{.Level}}</meter>
<span{{if .LowBudget}} class="low"{{end}}>{{.Available}} / {{.Capacity}}</span>{{else if .HasBudget}}<span class="detail">no level reported</span>{{else}}<span class="none">none</span>{{end}}</td>
<td>{{if .HasBudget}}budget {{.BudgetRefused}}{{end}}{{if and .HasBudget .HasBreaker}}<br>{{end}}{{if .HasBreaker}}breaker {{.BreakerRefused}}{{end}}</td>
<td class="num">{{.Attempts}}</td>
<td class="num">{{.Retries}}{{if .RetryShare}} <span class="detail">({{.RetryShare}})</span>{{end}}</td>
<td>{{if .LastFailure}}{{.LastFailure}} <span class="detail" title="{{.LastFailureAt}}">{{.LastFailureAgo}}</span>{{else}}<span class="none">none</span>{{end}}</td>
<td><span title="{{.LastUsedAt}}">{{.LastUsedAgo}}</span></td>
</tr>
{{else}}<tr><td colspan="8" class="none">No host has state: every request so far succeeded, or what failed has recovered.</td></tr>
{{end}}</tbody>
</table>
<p class="note">A host gets state at its first failure, or at its first request when it hedges or has an overload
control; other hosts that have only succeeded are not listed, and state back at rest (a full budget, a closed breaker
without failures, controls with nothing to say) is dropped after a minute. Counts run from when the host got state.
Refused: retries the retry budget refused, attempts the open breaker refused. Hedging and overload figures are in the
JSON form (?format=json) and Transport.Stats.</p>
</body>
</html>
`))
