package statuspage_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
	"github.com/seedhq/httpretry/statuspage"
)

// reportingFleet is a Fleet that reports its state as an expvar.Var does.
type reportingFleet struct {
	httpretrytest.Fleet
	state func() string
}

func (f *reportingFleet) String() string { return f.state() }

func fleetPage(t *testing.T, fleet httpretry.Fleet, query string) (string, int) {
	t.Helper()
	tr := &httpretry.Transport{Base: httpretrytest.RoundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }), Fleet: fleet}
	resp := fetchPage(t, statuspage.Handler(tr), "/"+query)
	return pageBody(t, resp), resp.StatusCode
}

// The page shows what a Fleet that is an expvar.Var reports, in order,
// in HTML and JSON.
func TestStatusPageShowsTheFleet(t *testing.T) {
	f := &reportingFleet{state: func() string { return `{"up":false,"downs":2,"slow":7}` }}
	page, code := fleetPage(t, f, "")
	require.Equal(t, http.StatusOK, code)
	assert.Regexp(t, `Fleet: up <b class="open">false</b> · downs <b>2</b> · slow <b>7</b></p>`, page)

	body, code := fleetPage(t, f, "?format=json")
	require.Equal(t, http.StatusOK, code)
	var doc struct {
		Fleet map[string]any `json:"fleet"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, map[string]any{"up": false, "downs": 2.0, "slow": 7.0}, doc.Fleet)
}

// A Transport without a Fleet, or with one that reports nothing, shows
// no fleet at all.
func TestStatusPageWithoutAFleet(t *testing.T) {
	for name, f := range map[string]httpretry.Fleet{"none": nil, "silent": &httpretrytest.Fleet{}} {
		page, _ := fleetPage(t, f, "")
		assert.NotContains(t, page, "Fleet:", name)
		body, _ := fleetPage(t, f, "?format=json")
		assert.NotContains(t, body, `"fleet"`, name)
	}
}

// What a Fleet of the user's reports is not trusted: one that is not a
// JSON object, too large, or panics is shown as a problem, the page still
// served; names and values are escaped.
func TestStatusPageFleetThatMisbehaves(t *testing.T) {
	cases := map[string]struct {
		state func() string
		want  string
	}{
		"not JSON":   {func() string { return "up" }, "not a JSON object"},
		"an array":   {func() string { return "[1,2]" }, "not a JSON object"},
		"too many":   {func() string { return "{" + strings.Repeat(`"a":1,`, 40) + `"b":2}` }, "not a JSON object of at most 32 fields"},
		"too large":  {func() string { return `{"a":"` + strings.Repeat("x", 20<<10) + `"}` }, "more than 16384"},
		"panics":     {func() string { panic("boom") }, "its String panicked: boom"},
		"hostile":    {func() string { return `{"<script>":"<img src=x>"}` }, "&lt;script&gt; <b>&lt;img src=x&gt;</b>"},
		"long value": {func() string { return `{"a":"` + strings.Repeat("é", 300) + `"}` }, strings.Repeat("é", 100) + "…"},
	}
	for name, c := range cases {
		f := &reportingFleet{state: c.state}
		page, code := fleetPage(t, f, "")
		assert.Equal(t, http.StatusOK, code, name)
		assert.Contains(t, page, c.want, name)
		body, code := fleetPage(t, f, "?format=json")
		assert.Equal(t, http.StatusOK, code, name)
		assert.True(t, json.Valid([]byte(body)), "%s: the JSON form is not JSON", name)
	}
}
