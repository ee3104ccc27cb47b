package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/config"
)

// demo loads path and runs the demo on synctest's fake clock, so that the
// backoff waits pass at once.
func demo(t *testing.T, path string) []string {
	t.Helper()
	tr, err := load(path, "CONFIGYAMLTEST")
	require.NoError(t, err)
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) { run(&out, tr) })
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

func TestRetryYAML(t *testing.T) {
	assert.Equal(t, []string{
		`GET https://payments.example.com/v1/charges: 503 after 5 attempt(s), X-Attempt "5" on the last`,
		`POST https://payments.example.com/v1/refunds: 503 after 5 attempt(s), X-Refund-Key sent (quoted: true), X-Attempt "5" on the last`,
		`GET https://search.example.com/v1/search?q=shoes: 503 after 3 attempt(s), X-Attempt "3" on the last`,
		`GET https://billing.internal.example.com/health: 503 after 1 attempt(s), X-Attempt "1" on the last`,
		`GET https://api.example.org/status: 503 after 3 attempt(s), X-Attempt "3" on the last`,
	}, demo(t, "retry.yaml"))
}

// The environment goes over the whole file: the top level, and host
// entries that set the field themselves (payments.example.com sets 5,
// *.internal.example.com 1), so every host gets what the operator said.
func TestEnvironmentOverFile(t *testing.T) {
	t.Setenv("CONFIGYAMLTEST_MAX_ATTEMPTS", "2")
	lines := demo(t, "retry.yaml")
	assert.Contains(t, lines[0], "payments.example.com/v1/charges: 503 after 2 attempt(s)")
	assert.Contains(t, lines[1], "payments.example.com/v1/refunds: 503 after 2 attempt(s)")
	assert.Contains(t, lines[2], "search.example.com/v1/search?q=shoes: 503 after 2 attempt(s)")
	assert.Contains(t, lines[3], "billing.internal.example.com/health: 503 after 2 attempt(s)")
	assert.Contains(t, lines[4], "api.example.org/status: 503 after 2 attempt(s)")

	t.Setenv("CONFIGYAMLTEST_MAX_ATTEMPTS", "many")
	_, err := load("retry.yaml", "CONFIGYAMLTEST")
	assert.EqualError(t, err, `httpretry: invalid config: CONFIGYAMLTEST_MAX_ATTEMPTS: "many" is not an integer`)
}

func TestBrokenYAML(t *testing.T) {
	_, err := load("broken.yaml", "CONFIGYAMLTEST")
	assert.EqualError(t, err, strings.Join([]string{
		`broken.yaml:`,
		`httpretry: invalid config: backoff.jitter: "fulll" is not one of none, full, equal, percent`,
		`httpretry: invalid config: attempt_timeout: "2" has no unit: write a duration such as "2s"`,
		`httpretry: invalid policy: hosts["payments.example.com"].max_attempts: -1 is negative`,
		`httpretry: invalid policy: hosts["payments.example.com/v1/refunds"].breaker: is per host: set it on the key without the path`,
	}, "\n"))
	assert.ErrorIs(t, err, config.ErrInvalid)
	assert.ErrorIs(t, err, httpretry.ErrInvalidPolicy)
}

// A field the Config does not have is reported by the YAML decoder, with
// its line.
func TestUnknownYAMLField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retry.yaml")
	require.NoError(t, os.WriteFile(path, []byte("max_attempts: 3\nmax_attemps: 4\nhosts:\n  a.example.com:\n    keys:\n      methodz: [POST]\n"), 0o600))
	_, err := load(path, "CONFIGYAMLTEST")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2: field max_attemps not found")
	assert.Contains(t, err.Error(), "line 6: field methodz not found")
}

func TestEmptyYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(path, []byte("# nothing set\n"), 0o600))
	tr, err := load(path, "CONFIGYAMLTEST")
	require.NoError(t, err)
	assert.Equal(t, httpretry.Policy{}, tr.Policy, "the default policy")
	assert.Nil(t, tr.Hosts)
}

// The YAML names are the JSON names: a file read as YAML and written as
// JSON reads back the same, and so does a trip through YAML. full.yaml
// sets every field somewhere, which the test checks.
func TestYAMLAndJSONAgree(t *testing.T) {
	for _, path := range []string{"retry.yaml", "testdata/full.yaml"} {
		t.Run(path, func(t *testing.T) {
			cfg, err := readConfig(path)
			require.NoError(t, err)
			_, err = cfg.Transport()
			require.NoError(t, err)

			data, err := json.Marshal(cfg)
			require.NoError(t, err)
			fromJSON, err := config.Parse(data)
			require.NoError(t, err)
			assert.Equal(t, cfg, fromJSON, "YAML → JSON → config")

			out, err := yaml.Marshal(cfg)
			require.NoError(t, err)
			var fromYAML config.File
			dec := yaml.NewDecoder(bytes.NewReader(out))
			dec.KnownFields(true)
			require.NoError(t, dec.Decode(&fromYAML))
			assert.Equal(t, cfg, fromYAML, "config → YAML → config:\n%s", out)
		})
	}

	cfg, err := readConfig("testdata/full.yaml")
	require.NoError(t, err)
	set := map[string]bool{}
	markSet(reflect.ValueOf(cfg.Policy), "", set)
	for _, h := range cfg.Hosts {
		markSet(reflect.ValueOf(h), "", set)
	}
	var all []string
	listFields(reflect.TypeFor[config.Policy](), "", &all)
	for _, f := range all {
		assert.True(t, set[f], "testdata/full.yaml sets %s somewhere", f)
	}
}

// markSet records the leaf fields of the config struct v that are set.
func markSet(v reflect.Value, path string, set map[string]bool) {
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if f := v.Field(i); f.Kind() == reflect.Struct {
			markSet(f, path+name+".", set)
		} else if !f.IsZero() {
			set[path+name] = true
		}
	}
}

func listFields(t reflect.Type, path string, all *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct {
			listFields(f.Type, path+f.Name+".", all)
		} else {
			*all = append(*all, path+f.Name)
		}
	}
}

// The two YAML details docs/config.md warns about.
func TestYAMLDetails(t *testing.T) {
	var cfg config.File
	err := yaml.Unmarshal([]byte("hosts:\n  *.internal.example.com:\n    max_attempts: 1\n"), &cfg)
	assert.Error(t, err, "a bare * starts an alias")
	require.NoError(t, yaml.Unmarshal([]byte("hosts:\n  \"*.internal.example.com\":\n    max_attempts: 1\n"), &cfg))
	assert.Equal(t, 1, cfg.Hosts["*.internal.example.com"].MaxAttempts)

	noMethods := config.File{Policy: config.Policy{Keys: config.Keys{Methods: []string{}, Header: "X-Key"}}}
	out, err := yaml.Marshal(noMethods)
	require.NoError(t, err)
	var back config.File
	require.NoError(t, yaml.Unmarshal(out, &back))
	assert.Nil(t, back.Keys.Methods, "an empty list of methods is dropped in YAML:\n%s", out)
	data, err := json.Marshal(noMethods)
	require.NoError(t, err)
	fromJSON, err := config.Parse(data)
	require.NoError(t, err)
	assert.Equal(t, []string{}, fromJSON.Keys.Methods, "but kept in JSON")
}
