// Package statuspage serves the per-host state of an httpretry.Transport as
// a page an operator can read, and as JSON, as net/http/pprof and expvar
// serve theirs:
//
//	mux.Handle("/debug/httpretry", statuspage.Handler(tr))
//
// The page lists the hosts most in trouble first (open breakers, then
// half-open ones, then the emptiest budgets, then the most recent
// failures), a bounded page at a time, so that rendering it costs the same
// whether the Transport keeps state for ten hosts or ten thousand.
package statuspage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/seedhq/httpretry"
)

// Handler returns an http.Handler that shows the per-host state of t
// (see Transport.StatsPage): one row per host, hosts in trouble first —
// open breakers, then half-open ones, then the emptiest budgets, then the
// most recent failures — a page of them at a time. Query parameters:
// ?filter=TEXT keeps the hosts whose key contains TEXT; ?page=N (from 1)
// and ?per=N (1 to 500, 50 by default) choose the page; ?format=json gives
// the same page as JSON, for machines; ?refresh=N reloads the page every N
// seconds (1 to 3600), without JavaScript.
//
// In the JSON, a float that JSON has no number for — +Inf or NaN, which a
// Budget of the user's may report as its level — is written as the string
// "+Inf", "-Inf" or "NaN", and a budget's level only when its available
// and capacity are finite, capacity above 0. Either form is rendered
// whole before the status is sent: one that fails to render answers 500,
// never a 200 with a cut body.
//
// When t.Fleet is also an expvar.Var (the fleet module's Fleet is), the
// page shows the fleet's state above the hosts, and the JSON has it as
// "fleet": the object its String returns, at most 32 fields. One whose
// String is not a JSON object, or panics, is shown as that, not trusted;
// String runs on the request's goroutine, so it must answer at once, as
// expvar's do.
//
// The page is plain HTML with no script, and escapes every value: host
// names come from the URLs the process was asked to fetch. It serves GET
// and HEAD. It lists the hosts the process talks to, so mount it where
// only operators reach it, as one would net/http/pprof.
func Handler(t *httpretry.Transport) http.Handler {
	return handler{t}
}

type handler struct{ t *httpretry.Transport }

// The rows of one page: 50 unless ?per= says otherwise, and at most 500.
const (
	defaultPer = 50
	maxPer     = 500
)

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	refresh, ok := intParam(q.Get("refresh"), 0, 1, 3600)
	if !ok {
		http.Error(w, "refresh: seconds from 1 to 3600", http.StatusBadRequest)
		return
	}
	page, ok := intParam(q.Get("page"), 1, 1, 1<<20)
	if !ok {
		http.Error(w, "page: a number from 1", http.StatusBadRequest)
		return
	}
	per, ok := intParam(q.Get("per"), defaultPer, 1, maxPer)
	if !ok {
		http.Error(w, "per: rows per page, from 1 to 500", http.StatusBadRequest)
		return
	}
	filter := q.Get("filter")
	if len(filter) > 256 {
		http.Error(w, "filter: at most 256 bytes", http.StatusBadRequest)
		return
	}
	stats, total := h.t.StatsPage(httpretry.StatsQuery{Filter: filter, Offset: (page - 1) * per, Limit: per})
	now := time.Now()
	view := pageOf{Filter: filter, Page: page, Per: per, Total: total, First: (page-1)*per + 1}
	view.Fleet = fleetOf(h.t.Fleet)

	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	// Rendered whole before the status is sent: a value that fails to
	// render answers 500, never a 200 with a cut body.
	var body bytes.Buffer
	var err error
	if format == "json" {
		hdr.Set("Content-Type", "application/json")
		err = json.NewEncoder(&body).Encode(statusJSON(stats, now, view))
	} else {
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		err = statusPage.Execute(&body, statusView(stats, now, refresh, view))
	}
	if err != nil {
		hdr.Del("Content-Security-Policy")
		http.Error(w, "statuspage: the page did not render", http.StatusInternalServerError)
		return
	}
	hdr.Set("Content-Length", strconv.Itoa(body.Len()))
	_, _ = w.Write(body.Bytes())
}

// intParam parses v, def when empty, and reports whether it is in [lo, hi].
func intParam(v string, def, lo, hi int) (int, bool) {
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= lo && n <= hi
}

// pageOf is where a page stands among the hosts.
type pageOf struct {
	Filter     string
	Page, Per  int
	Total      int // hosts that match the filter
	First      int // the page's first row, from 1
	Prev, Next string
	Fleet      *fleetView // nil: the Transport has no Fleet that reports its state
}

// reportsLevel reports whether b reports a level at all: BudgetStats
// holds zeros for a budget without a Level method.
func reportsLevel(b *httpretry.BudgetStats) bool { return b.Available != 0 || b.Capacity != 0 }

// budgetLevel returns the share of b available, from 0 to 1, and whether
// there is one: only when Available and Capacity are finite and Capacity
// is above 0. A budget of the user's may report +Inf ("unlimited") or
// NaN, which make no share.
func budgetLevel(b *httpretry.BudgetStats) (float64, bool) {
	if b.Capacity <= 0 || !finite(b.Available) || !finite(b.Capacity) {
		return 0, false
	}
	return min(max(b.Available/b.Capacity, 0), 1), true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

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
	Available     string // "" when the budget reports no level
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
	Hosts       int // on the page
	Of          pageOf
	Open        int
	HalfOpen    int
	LowBudgets  int
	LowBudgetAt string
	Rows        []statusRow
}

func statusView(stats []httpretry.HostStats, now time.Time, refresh int, of pageOf) statusPageData {
	link := func(page int) string {
		v := url.Values{"page": {strconv.Itoa(page)}}
		if of.Per != defaultPer {
			v.Set("per", strconv.Itoa(of.Per))
		}
		if of.Filter != "" {
			v.Set("filter", of.Filter)
		}
		if refresh > 0 {
			v.Set("refresh", strconv.Itoa(refresh))
		}
		return "?" + v.Encode()
	}
	if of.Page > 1 {
		of.Prev = link(of.Page - 1)
	}
	if of.First+len(stats) <= of.Total && len(stats) > 0 {
		of.Next = link(of.Page + 1)
	}
	d := statusPageData{
		Generated:   now.UTC().Format(time.RFC3339),
		Refresh:     refresh,
		Hosts:       len(stats),
		Of:          of,
		LowBudgetAt: fmt.Sprintf("%.0f %%", lowBudget*100),
		Rows:        make([]statusRow, 0, len(stats)),
	}
	for _, s := range stats {
		r := statusRow{Host: s.Host, Attempts: s.Attempts, Retries: s.Retries}
		if b := s.Breaker; b != nil {
			r.HasBreaker, r.Breaker, r.BreakerRefused = true, b.State.String(), b.Refusals
			// A breaker starts counting afresh at each change of state:
			// the counts of an open one are empty.
			switch b.State {
			case httpretry.BreakerOpen:
				d.Open++
			case httpretry.BreakerHalfOpen:
				d.HalfOpen++
				r.BreakerDetail = fmt.Sprintf("%d trial attempts succeeded", b.Successes)
			default:
				r.BreakerDetail = fmt.Sprintf("%d failed, %d succeeded in the window; %d in a row",
					b.Failures, b.Successes, b.ConsecutiveFailures)
			}
		}
		if b := s.Budget; b != nil {
			r.HasBudget, r.BudgetRefused = true, b.Refusals
			if reportsLevel(b) {
				r.Available, r.Capacity = number(b.Available), number(b.Capacity)
			}
			if level, ok := budgetLevel(b); ok {
				r.HasLevel = true
				r.Low, r.High = number(b.Capacity*lowBudget), number(b.Capacity/2)
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

// number writes f rounded to a whole number; +Inf, -Inf and NaN as such.
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
// out. Floats are jsonFloats, so that +Inf and NaN, which JSON has no
// number for, come out as strings.
type (
	statusDoc struct {
		GeneratedAt time.Time       `json:"generated_at"`
		Total       int             `json:"total"` // hosts that match the filter
		Page        int             `json:"page"`
		Per         int             `json:"per"`
		Filter      string          `json:"filter,omitempty"`
		Hosts       []statusHost    `json:"hosts"`
		Fleet       json.RawMessage `json:"fleet,omitempty"`
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
		Tokens   jsonFloat `json:"tokens"`
		Refusals int64     `json:"refusals"`
		Samples  int       `json:"samples"`
		P50      string    `json:"p50,omitempty"`
		P95      string    `json:"p95,omitempty"`
		P99      string    `json:"p99,omitempty"`
		Delay    string    `json:"delay,omitempty"`
	}
	statusThrottle struct {
		Probability jsonFloat `json:"probability"`
		Refusals    int64     `json:"refusals"`
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
		InFlight  int64      `json:"in_flight"`
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
		Available *jsonFloat `json:"available,omitempty"`
		Capacity  *jsonFloat `json:"capacity,omitempty"`
		Level     *jsonFloat `json:"level,omitempty"`
		Refusals  int64      `json:"refusals"`
	}
	statusFailure struct {
		Class string    `json:"class"`
		At    time.Time `json:"at"`
	}
)

// jsonFloat is a float64 that encodes as encoding/json writes it when it
// is finite, and as the string "+Inf", "-Inf" or "NaN" when it is not.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if v := float64(f); !finite(v) {
		return strconv.AppendQuote(nil, strconv.FormatFloat(v, 'g', -1, 64)), nil
	}
	return json.Marshal(float64(f))
}

func statusJSON(stats []httpretry.HostStats, now time.Time, of pageOf) statusDoc {
	doc := statusDoc{GeneratedAt: now.UTC(), Total: of.Total, Page: of.Page, Per: of.Per, Filter: of.Filter,
		Hosts: make([]statusHost, 0, len(stats)), Fleet: of.Fleet.json()}
	for _, s := range stats {
		h := statusHost{Host: s.Host, Attempts: s.Attempts, Retries: s.Retries, LastUsed: s.LastUsed.UTC()}
		if b := s.Breaker; b != nil {
			h.Breaker = &statusBreaker{State: b.State.String(), Failures: b.Failures,
				Successes: b.Successes, ConsecutiveFailures: b.ConsecutiveFailures, Refusals: b.Refusals}
		}
		if b := s.Budget; b != nil {
			h.Budget = &statusBudget{Refusals: b.Refusals}
			if reportsLevel(b) {
				available, capacity := jsonFloat(b.Available), jsonFloat(b.Capacity)
				h.Budget.Available, h.Budget.Capacity = &available, &capacity
			}
			if level, ok := budgetLevel(b); ok {
				l := jsonFloat(level)
				h.Budget.Level = &l
			}
		}
		if hs := s.Hedging; hs != nil {
			h.Hedging = &statusHedging{Tokens: jsonFloat(hs.Tokens), Refusals: hs.Refusals, Samples: hs.Samples}
			if hs.Samples > 0 {
				h.Hedging.P50, h.Hedging.P95, h.Hedging.P99 = hs.P50.String(), hs.P95.String(), hs.P99.String()
			}
			if hs.Delay > 0 {
				h.Hedging.Delay = hs.Delay.String()
			}
		}
		if th := s.Throttle; th != nil {
			h.Throttle = &statusThrottle{Probability: jsonFloat(th.Probability), Refusals: th.Refusals}
		}
		if l := s.Limit; l != nil {
			h.Limit = &statusLimit{Limit: l.Limit, InFlight: l.InFlight, Waiting: l.Waiting, Refusals: l.Refusals}
		}
		if p := s.Pacing; p != nil {
			h.Pacing = &statusPacing{InFlight: p.InFlight, Refusals: p.Refusals}
			if !p.Until.IsZero() {
				until, left := p.Until.UTC(), p.Remaining
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

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"add": func(a, b, c int) int { return a + b + c },
}).Parse(`<!DOCTYPE html>
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
p.summary b.up { color: #2f7d32; }
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
<p class="summary">{{.Of.Total}} host{{if ne .Of.Total 1}}s{{end}} with state{{with .Of.Filter}} matching “{{.}}”{{end}}{{if .Hosts}},
{{.Of.First}}–{{add .Of.First .Hosts -1}} shown, most in trouble first{{end}} ·
<b class="open">{{.Open}} open</b> ·
<b class="half-open">{{.HalfOpen}} half-open</b> ·
<b class="low">{{.LowBudgets}} budget{{if ne .LowBudgets 1}}s{{end}} below {{.LowBudgetAt}}</b> on this page ·
generated {{.Generated}} · <a href="?format=json">JSON</a></p>
{{with .Of.Fleet}}<p class="summary">Fleet:{{with .Problem}} <span class="low">{{.}}</span>{{end}}{{range $i, $f := .Fields}}{{if $i}} ·{{end}} {{$f.Name}} <b{{if eq $f.Name "up"}} class="{{if eq $f.Value "true"}}up{{else}}open{{end}}"{{end}}>{{$f.Value}}</b>{{end}}</p>
{{end}}<form method="get"><input name="filter" value="{{.Of.Filter}}" placeholder="host contains…"> <button>Filter</button>
{{with .Of.Prev}}<a href="{{.}}">← previous</a>{{end}} {{with .Of.Next}}<a href="{{.}}">next →</a>{{end}}</form>
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
<span{{if .LowBudget}} class="low"{{end}}>{{.Available}} / {{.Capacity}}</span>{{else if .HasBudget}}<span class="detail">{{if .Available}}{{.Available}} / {{.Capacity}}, no level{{else}}no level reported{{end}}</span>{{else}}<span class="none">none</span>{{end}}</td>
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
without failures, controls with nothing to say) is not listed after a minute unused. Counts run from when the host got state.
Refused: retries the retry budget refused, attempts the open breaker refused. Hedging and overload figures are in the
JSON form (?format=json) and Transport.StatsPage.</p>
</body>
</html>
`))
