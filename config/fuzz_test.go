package config_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/config"
)

// FuzzParse feeds Parse arbitrary bytes. Whatever they are, Parse either
// fails with errors that each carry the package's prefix and wrap
// ErrInvalid, or returns a File that survives a trip through JSON
// unchanged and that either builds a Transport whose Validate passes or
// fails the same way, wrapping ErrInvalid or ErrInvalidPolicy. Nothing
// panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullConfig))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"max_attempts": 3, "hosts": {"api.example.com": {"max_attempts": -1}}}`))
	f.Add([]byte(`{"backoff": {"shape": "linear", "step": "1s", "cap": "none"}, "attempt_timeout": "none"}`))
	f.Add([]byte(`{"budget": {"kind": "ratio", "ratio": 0.2, "window": "10s", "min_per_second": -1}}`))
	f.Add([]byte(`{"hosts": {"*.example.com:8443/v1": {"keys": {"methods": ["POST"], "quoted": true}}}}`))
	f.Add([]byte(`{"breaker": {"failure_ratio": 0.5}, "hedge": {"delay": "1ms", "max_hedges": 9}, "hints": {"reset_header": "X-RateLimit-Reset"}}`))
	f.Add([]byte(`{"max_attempts": "3", "x": [1, {"y": null}], "hosts": {"a": 1, "a": {}}}`))
	f.Add([]byte(`{"a\nb": 1, "": 2, "hosts": {"k\"\n": {"\u00e9": {}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			checkErrors(t, err, config.ErrInvalid)
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := config.Parse(out)
		if err != nil {
			t.Fatalf("Parse refuses what it wrote: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("File → JSON → File changed it:\n%#v\n%#v", c, back)
		}
		tr, err := c.Transport()
		if err != nil {
			checkErrors(t, err, config.ErrInvalid, httpretry.ErrInvalidPolicy)
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("built a Transport that does not validate: %v", err)
		}
	})
}

// checkErrors fails unless every error joined in err is a *config.Error
// that wraps one of kinds and whose line carries the package's prefix.
func checkErrors(t *testing.T, err error, kinds ...error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *config.Error
		if !errors.As(e, &ce) || !slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(e, k) }) {
			t.Fatalf("not a *config.Error wrapping one of %v: %v", kinds, e)
		}
		if line := e.Error(); strings.Contains(line, "\n") ||
			!strings.HasPrefix(line, "httpretry: invalid config: ") && !strings.HasPrefix(line, "httpretry: invalid policy: ") {
			t.Fatalf("error not one line with the prefix: %q", line)
		}
	}
}
