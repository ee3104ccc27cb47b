package httpretry_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/seedhq/httpretry"
)

// FuzzConfig feeds ParseConfig arbitrary bytes. Whatever they are, it
// either fails with errors that each carry the package's prefix and wrap
// ErrInvalidConfig or ErrInvalidPolicy, or returns a Config that builds a
// Transport whose Validate passes and that survives a trip through JSON
// unchanged. It never panics.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(fullConfig))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"max_attempts": 3, "hosts": {"api.example.com": {"max_attempts": -1}}}`))
	f.Add([]byte(`{"backoff": {"shape": "linear", "step": "1s", "cap": "none"}, "attempt_timeout": "none"}`))
	f.Add([]byte(`{"budget": {"kind": "ratio", "ratio": 0.2, "window": "10s", "min_per_second": -1}}`))
	f.Add([]byte(`{"hosts": {"*.example.com:8443/v1": {"keys": {"methods": ["POST"], "quoted": true}}}}`))
	f.Add([]byte(`{"breaker": {"failure_ratio": 0.5}, "hedge": {"delay": "1ms", "max_hedges": 9}, "hints": {"reset_format": "epoch-seconds"}}`))
	f.Add([]byte(`{"max_attempts": "3", "x": [1, {"y": null}], "hosts": {"a": 1, "a": {}}}`))
	f.Add([]byte(`{"a\nb": 1, "": 2, "hosts": {"k\"\n": {"\u00e9": {}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := httpretry.ParseConfig(data)
		if err != nil {
			if !errors.Is(err, httpretry.ErrInvalidConfig) && !errors.Is(err, httpretry.ErrInvalidPolicy) {
				t.Fatalf("error wraps neither sentinel: %v", err)
			}
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, "httpretry: invalid config: ") && !strings.HasPrefix(line, "httpretry: invalid policy: ") {
					t.Fatalf("error line without the prefix: %q", line)
				}
			}
			return
		}
		tr, err := c.Transport()
		if err != nil {
			t.Fatalf("ParseConfig accepted what Transport refuses: %v", err)
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("built a Transport that does not validate: %v", err)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := httpretry.ParseConfig(out)
		if err != nil {
			t.Fatalf("ParseConfig refuses what it wrote: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("config → JSON → config changed it:\n%#v\n%#v", c, back)
		}
	})
}
