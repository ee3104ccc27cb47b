// Config-yaml reads httpretry's settings from a YAML file, puts the
// HTTPRETRY_* environment variables over them, builds the Transport, and
// calls a few hosts through it. The upstream is an in-memory stand-in that
// answers 503 to everything, so each line shows how many attempts the
// configuration gives that URL. It needs no network.
//
//	cd examples/config-yaml
//	go run .                              # reads retry.yaml
//	HTTPRETRY_MAX_ATTEMPTS=2 go run .     # the environment wins, for every host
//	go run . broken.yaml                  # every problem, at its path
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/config"
	"github.com/seedhq/httpretry/httpretrytest"
)

func main() {
	path := "retry.yaml"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	tr, err := load(path, "HTTPRETRY")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	run(os.Stdout, tr)
}

// load reads the YAML file at path, puts the environment variables named
// with envPrefix over it, for every host, and builds the Transport.
func load(path, envPrefix string) (*httpretry.Transport, error) {
	cfg, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	env, err := config.FromEnv(envPrefix)
	if err != nil {
		return nil, err
	}
	tr, err := cfg.Override(env).Transport()
	if err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	return tr, nil
}

// readConfig decodes the YAML file at path into a config.File. A
// field the File does not have is an error, with its line.
func readConfig(path string) (config.File, error) {
	var cfg config.File
	f, err := os.Open(path)
	if err != nil {
		return cfg, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// run calls a few URLs through tr over an upstream that is always
// unavailable, and writes how each call went.
func run(out io.Writer, tr *httpretry.Transport) {
	upstream := httpretrytest.NewScript(httpretrytest.Status(http.StatusServiceUnavailable))
	tr.Base = upstream
	client := &http.Client{Transport: tr}
	for _, c := range []struct{ method, url string }{
		{http.MethodGet, "https://payments.example.com/v1/charges"},
		{http.MethodPost, "https://payments.example.com/v1/refunds"},
		{http.MethodGet, "https://search.example.com/v1/search?q=shoes"},
		{http.MethodGet, "https://billing.internal.example.com/health"},
		{http.MethodGet, "https://api.example.org/status"},
	} {
		before := len(upstream.Requests())
		var body io.Reader
		if c.method == http.MethodPost {
			body = strings.NewReader(`{"charge": "ch_1", "amount": 1999}`)
		}
		req, err := http.NewRequest(c.method, c.url, body)
		if err != nil {
			fmt.Fprintln(out, err)
			continue
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(out, "%s %s: %v\n", c.method, c.url, err)
			continue
		}
		resp.Body.Close()
		seen := upstream.Requests()[before:]
		fmt.Fprintf(out, "%s %s: %d after %d attempt(s)", c.method, c.url, resp.StatusCode, len(seen))
		for _, h := range []string{"Idempotency-Key", "X-Refund-Key"} {
			if k := seen[0].Header.Get(h); k != "" {
				fmt.Fprintf(out, ", %s sent (quoted: %v)", h, strings.HasPrefix(k, `"`))
			}
		}
		fmt.Fprintf(out, ", %s %q on the last\n", tr.Policy.AttemptHeader, seen[len(seen)-1].Header.Get(tr.Policy.AttemptHeader))
	}
}
