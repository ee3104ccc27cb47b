package bench

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loggingChild names the library the child process runs, in
// TestCompareDefaultLogging.
const loggingChild = "BENCH_DEFAULT_LOGGING_CHILD"

// TestCompareDefaultLogging: what each library writes to stderr when left
// at its defaults, for two GETs to a server that answers 503 once, then 200.
// go-retryablehttp's NewClient (and a RoundTripper with a nil Client) logs
// through a log.Logger on os.Stderr: a "[DEBUG] GET <url>" line for every
// request, and one for every retry. httpretry (Logger nil) and failsafehttp
// write nothing. A package-level logger bound to os.Stderr cannot be
// redirected inside the test, so the libraries run in a child process (this
// test binary again) whose stderr the test reads, one section per library.
func TestCompareDefaultLogging(t *testing.T) {
	if os.Getenv(loggingChild) != "" {
		runDefaultLoggingChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompareDefaultLogging$", "-test.count=1")
	cmd.Env = append(os.Environ(), loggingChild+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "child: %s%s", out, stderr.String())
	require.Contains(t, string(out), "PASS", "the child ran its requests")
	sections := map[string][]string{}
	var lib string
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			lib = name
			sections[lib] = []string{}
			continue
		}
		sections[lib] = append(sections[lib], line)
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			lines, ok := sections[lib.name]
			require.True(t, ok, "the child ran %s", lib.name)
			t.Logf("stderr: %q", lines)
			if lib.name != "retryablehttp" {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 3, "one line per request, one per retry")
			assert.Regexp(t, `\[DEBUG\] GET http://127\.0\.0\.1:\d+/first$`, lines[0])
			assert.Regexp(t, `\[DEBUG\] GET http://127\.0\.0\.1:\d+/first \(status: 503\): retrying in 0s \(4 left\)$`, lines[1])
			assert.Regexp(t, `\[DEBUG\] GET http://127\.0\.0\.1:\d+/second$`, lines[2])
		})
	}
}

// runDefaultLoggingChild makes the two calls with each library at its
// defaults, changing only the waits (to zero), never the logger, and
// starts each library's section of stderr with a "### name" line.
func runDefaultLoggingChild(t *testing.T) {
	for _, lib := range libraries {
		fmt.Fprintln(os.Stderr, "### "+lib.name)
		srv := newScripted(t, 503, 200)
		var rt http.RoundTripper
		switch lib.name {
		case "httpretry":
			rt = &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		case "retryablehttp":
			c := retryablehttp.NewClient()
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
			rt = &retryablehttp.RoundTripper{Client: c}
		case "failsafehttp":
			rt = failsafehttp.NewRoundTripper(nil, failsafehttp.NewRetryPolicyBuilder().Build())
		}
		for _, path := range []string{"/first", "/second"} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			closeResp(resp)
		}
		assert.Equal(t, 3, srv.received())
	}
}
