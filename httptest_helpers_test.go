package httpretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/seedhq/httpretry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests send their requests to site, through a Base from package
// httpretrytest; these are the small helpers they share.

// site is the URL a request goes to unless its test needs another.
const site = "https://api.example.com/v1/things"

// get returns a GET of site with ctx.
func get(t *testing.T, ctx context.Context) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, site, nil)
	require.NoError(t, err)
	return req
}

// readAll reads r to its end, failing the test on an error.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatalf("read: %v", err)
	}
	return buf.String()
}

// errBoom is a failure for a Base or a body to return.
var errBoom = errors.New("boom")

// tokens returns the tokens a budget holds, from the level it reports
// (see Budget), or -1 if it reports none.
func tokens(b httpretry.Budget) int {
	l, ok := b.(interface {
		Level() (available, capacity float64)
	})
	if !ok {
		return -1
	}
	available, _ := l.Level()
	return int(available)
}

// What the overload tests share: a recorder of what a Transport reports,
// and checks of a local refusal.

// observed records what a Transport reports: every OnAttempt, every
// OnCall, and its log.
type observed struct {
	mu       sync.Mutex
	attempts []httpretry.Attempt
	calls    []httpretry.Call
	log      bytes.Buffer
}

// watch sets t's hooks and Logger to record into a new observed.
func watch(t *httpretry.Transport) *observed {
	o := &observed{}
	t.OnAttempt = func(a httpretry.Attempt) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.attempts = append(o.attempts, a)
	}
	t.OnCall = func(c httpretry.Call) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.calls = append(o.calls, c)
	}
	t.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &o.mu, w: &o.log}, nil))
	return o
}

// stops counts the calls by why they stopped.
func (o *observed) stops() map[httpretry.StopReason]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := map[httpretry.StopReason]int{}
	for _, c := range o.calls {
		n[c.Stop]++
	}
	return n
}

func (o *observed) lines(substr string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for l := range strings.SplitSeq(o.log.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// statsOf returns the Stats entry of host, failing if there is none.
func statsOf(t *testing.T, tr *httpretry.Transport, host string) httpretry.HostStats {
	t.Helper()
	for _, s := range tr.Stats() {
		if s.Host == host {
			return s
		}
	}
	t.Fatalf("no state for %s in %+v", host, tr.Stats())
	return httpretry.HostStats{}
}

// requireLocalRefusal checks err is a refusal of the call's first attempt
// by a local control: nothing sent, the sentinel and stop reason.
func requireLocalRefusal(t *testing.T, err error, sentinel error, reason httpretry.StopReason) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var re *httpretry.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Attempts, "nothing was sent")
	assert.Equal(t, reason, re.Stop)
}
