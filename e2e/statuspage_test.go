package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/seedhq/httpretry/statuspage"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// TestStatusPageInChromium renders statuspage.Handler in headless
// Chromium after real traffic: upstreams on loopback, named through the
// dialer, one of them nginx answering 502 for a dead upstream. It checks
// the table Chromium built (the order of the rows, the states, the budget
// meter) and the picture it drew (the badges' colours). With
// STATUS_SCREENSHOT=path it also writes the picture docs/observability.md
// shows:
//
//	cd e2e && STATUS_SCREENSHOT=../docs/img/status-page.png go test -run TestStatusPageInChromium -count=1 .
//
// Chromium is Debian's package; with CI=true a missing one fails the test
// (.ci/run installs it), elsewhere it is skipped, saying so.
func TestStatusPageInChromium(t *testing.T) {
	browser := chromium(t)
	tr := troubledHosts(t)
	page := httptest.NewServer(statuspage.Handler(tr))
	t.Cleanup(page.Close)

	// One run both builds the DOM and draws it: Chromium starts in
	// seconds, not milliseconds.
	shot := filepath.Join(t.TempDir(), "status.png")
	if path := os.Getenv("STATUS_SCREENSHOT"); path != "" {
		shot = path
	}
	dom := browser.run(t, "--dump-dom", "--screenshot="+shot, "--window-size=1280,440", "--hide-scrollbars",
		page.URL+"/debug/httpretry")
	rows := regexp.MustCompile(`(?s)<tr class="([^"]*)">\s*<td class="host">([^<]*)</td>`).FindAllStringSubmatch(dom, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[2]+" "+r[1])
	}
	want := []string{
		"api.payments.example:80 open",
		"search.example:80 half-open",
		"geo.example:80 ",
		"gateway.example:80 closed",
		"ledger.example:80 closed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows as Chromium built them:\n%s\nwant:\n%s\n\nDOM:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), dom)
	}
	for _, s := range []string{
		`<span class="state open">open</span>`,
		`<span class="state half-open">half-open</span>`,
		`<meter min="0" max="20" low="4" high="10" optimum="20" value="0">`,
		`<b class="open">1 open</b>`,
		`5 hosts with state`,
	} {
		if !strings.Contains(dom, s) {
			t.Errorf("the DOM lacks %s", s)
		}
	}

	img := decodePNG(t, shot)
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 440 {
		t.Errorf("screenshot is %v, want 1280×440", b.Size())
	}
	// The open badge (#b42318) and the half-open one (#f0a92c) were drawn.
	for name, c := range map[string][3]uint8{"open": {0xb4, 0x23, 0x18}, "half-open": {0xf0, 0xa9, 0x2c}} {
		if n := countColour(img, c); n < 200 {
			t.Errorf("%s badge: %d pixels of its colour, want a badge's worth (≥ 200)", name, n)
		}
	}
	t.Logf("screenshot: %s", shot)
}

// troubledHosts drives real requests through a Transport until its hosts
// are in the states the page sorts: an open breaker, a half-open one, an
// empty budget, a gateway's 502s, a failure that recovered. Every name
// resolves, through the dialer, to a server on loopback.
func troubledHosts(t *testing.T) *httpretry.Transport {
	t.Helper()
	status := func(code int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
	}
	failOnce := func() http.Handler {
		var n int
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if n++; n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
	}
	addrs := map[string]string{}
	for name, h := range map[string]http.Handler{
		"api.payments.example": status(http.StatusServiceUnavailable),
		"search.example":       status(http.StatusBadGateway),
		"geo.example":          status(http.StatusTooManyRequests),
		"ledger.example":       failOnce(),
	} {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		addrs[name+":80"] = srv.Listener.Addr().String()
	}
	dead, err := freePort() // nothing listens there: nginx answers 502
	if err != nil {
		t.Fatal(err)
	}
	gw := startNginx(t, net.JoinHostPort("127.0.0.1", dead))
	addrs["gateway.example:80"] = strings.TrimPrefix(gw.url, "http://")

	base := freshBase(t)
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		real, ok := addrs[addr]
		if !ok {
			return nil, fmt.Errorf("no test server for %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, real)
	}
	breaker := httpretry.BreakerPolicy{ConsecutiveFailures: 3, OpenFor: time.Hour}
	tr := &httpretry.Transport{Base: base,
		Policy: httpretry.Policy{Backoff: backoff.Constant(time.Millisecond), Breaker: breaker},
		Hosts: map[string]httpretry.Policy{
			"search.example": {Breaker: httpretry.BreakerPolicy{ConsecutiveFailures: 3, OpenFor: 50 * time.Millisecond}},
			"geo.example": {MaxAttempts: 6, Breaker: httpretry.BreakerPolicy{Disabled: true},
				NewBudget: func(string) httpretry.Budget {
					return httpretry.NewTokenBucket(httpretry.TokenBucketConfig{Capacity: 20, RetryCost: 5})
				}},
			"gateway.example": {MaxAttempts: 2},
		},
	}
	get := func(host string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+host+"/v1/things?token=secret", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil && !errors.Is(err, httpretry.ErrCircuitOpen) {
			t.Fatalf("%s: %v", host, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	get("search.example")            // three 502s: open, half-open 50 ms later
	get("ledger.example")            // a 503, then a 200
	time.Sleep(2 * time.Millisecond) // so that the gateway's failure is the more recent
	get("gateway.example")           // nginx's own 502, twice
	get("geo.example")               // four retries empty the budget; the fifth is refused
	get("api.payments.example")      // three 503s: open for an hour
	get("api.payments.example")      // refused
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if s := stateOf(tr, "search.example:80"); s.Breaker != nil && s.Breaker.State == httpretry.BreakerHalfOpen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("search.example's breaker did not turn half-open")
		}
	}
	return tr
}

func stateOf(tr *httpretry.Transport, host string) httpretry.HostStats {
	for _, s := range tr.Stats() {
		if s.Host == host {
			return s
		}
	}
	return httpretry.HostStats{}
}

// browser is headless Chromium, run once per command with a profile of
// its own and nothing that reaches beyond the machine.
type browser struct{ bin, profile string }

func chromium(t *testing.T) browser {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if bin, err := exec.LookPath(name); err == nil {
			return browser{bin: bin, profile: t.TempDir()}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: CI must install it (.ci/run does: apt-get install chromium)")
	}
	skipf(t, "chromium not found; install it (apt-get install chromium) to render the status page")
	return browser{}
}

// run runs Chromium with args and returns what it printed on stdout.
func (b browser) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + b.profile}, args...)
	cmd := exec.CommandContext(ctx, b.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// countColour counts the pixels within a few levels of c.
func countColour(img image.Image, c [3]uint8) int {
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d >= -6 && d <= 6 }
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, c[0]) && near(g, c[1]) && near(bl, c[2]) {
				n++
			}
		}
	}
	return n
}
