package config

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// TestConfigCoversPolicy fails when a Policy field, or a field of one of
// its sub-policies, has no config field and is not listed in
// codeOnlyFields: whoever adds a field to Policy is told where to add it.
func TestConfigCoversPolicy(t *testing.T) {
	t.Parallel()
	var walk func(pt, ct reflect.Type, goPath string)
	walk = func(pt, ct reflect.Type, goPath string) {
		for i := range pt.NumField() {
			pf := pt.Field(i)
			full := joinGo(goPath, pf.Name)
			f, ok := configFieldFor(ct, pf.Name)
			if slices.Contains(codeOnlyFields, full) {
				assert.False(t, ok, "Policy.%s is listed in codeOnlyFields but has a config field", full)
				continue
			}
			if !ok {
				t.Errorf("Policy.%s has no config field: add a field named %s, with json and yaml tags, to %v "+
					"(config/policy.go), or list %q in codeOnlyFields (config/mapping.go) if it is a function",
					full, pf.Name, ct, full)
				continue
			}
			cf := ct.Field(f.index)
			yamlName, _, _ := strings.Cut(cf.Tag.Get("yaml"), ",")
			assert.Equal(t, f.name, yamlName, "%v.%s: the yaml name differs from the json name", ct, cf.Name)
			assert.Regexp(t, `^[a-z][a-z_]*$`, f.name, "%v.%s: config names are lower case with underscores", ct, cf.Name)
			if cf.Type.Kind() == reflect.Struct && pf.Type.Kind() == reflect.Struct {
				walk(pf.Type, cf.Type, full)
			}
		}
		for _, f := range configFields(ct) {
			_, ok := pt.FieldByName(f.policy)
			assert.True(t, ok, "%v carries %s, which %v does not have", ct, f.policy, pt)
		}
	}
	walk(reflect.TypeFor[httpretry.Policy](), reflect.TypeFor[Policy](), "")
	for _, p := range codeOnlyFields {
		v := reflect.ValueOf(httpretry.Policy{})
		for name := range strings.SplitSeq(p, ".") {
			v = v.FieldByName(name)
			require.True(t, v.IsValid(), "codeOnlyFields lists %s, which Policy does not have", p)
		}
		assert.Equal(t, reflect.Func, v.Kind(), "codeOnlyFields lists %s, which is data", p)
	}
}

// fillPolicy sets every data field of the Policy struct v to a valid,
// non-zero value, and fails for a type it does not know, so that a new
// field is round-tripped by TestConfigRoundTripsEveryField.
func fillPolicy(t *testing.T, v reflect.Value, goPath string) {
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		full := joinGo(goPath, name)
		f := v.Field(i)
		if slices.Contains(codeOnlyFields, full) {
			continue
		}
		switch {
		case f.Type() == reflect.TypeFor[backoff.Strategy]():
			f.Set(reflect.ValueOf(backoff.Exponential{Base: 150 * time.Millisecond, Factor: 1.5, Cap: 2 * time.Second, Jitter: backoff.EqualJitter}))
		case f.Type() == reflect.TypeFor[func(string) httpretry.Budget]():
			f.Set(reflect.ValueOf(httpretry.NoBudget))
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(1500 * time.Millisecond))
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(3)
		case full == "Overload.ThrottleK":
			f.SetFloat(1.5) // at least 1
		case f.Kind() == reflect.Float64:
			f.SetFloat(0.5)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.String:
			f.SetString("X-" + name) // every string so far is a header name
		case f.Type() == reflect.TypeFor[[]string]():
			f.Set(reflect.ValueOf([]string{"PATCH"}))
		case f.Kind() == reflect.Struct:
			fillPolicy(t, f, full)
		default:
			t.Fatalf("fillPolicy: no value for Policy.%s of type %v: teach it one", full, f.Type())
		}
	}
}

// TestConfigRoundTripsEveryField sets every data field of a Policy and
// checks that Policy → config → JSON → config → Policy gives it back.
func TestConfigRoundTripsEveryField(t *testing.T) {
	t.Parallel()
	var p httpretry.Policy
	fillPolicy(t, reflect.ValueOf(&p).Elem(), "")
	// Endpoints belong to a host's key: the filled policy is valid there.
	require.NoError(t, (&httpretry.Transport{Base: noBase{}, Hosts: map[string]httpretry.Policy{"api.example.com": p}}).Validate(), "the filled policy is valid")

	c, err := PolicyOf(p)
	require.NoError(t, err)
	data, err := json.Marshal(c)
	require.NoError(t, err)
	var back Policy
	require.NoError(t, json.Unmarshal(data, &back), "%s", data)
	assert.Equal(t, c, back, "config → JSON → config")
	got, err := back.Policy()
	require.NoError(t, err, "%s", data)

	assert.Equal(t, reflect.ValueOf(httpretry.NoBudget).Pointer(), reflect.ValueOf(got.NewBudget).Pointer(), "NewBudget")
	p.NewBudget, got.NewBudget = nil, nil
	assert.Equal(t, p, got, "every field survives; JSON: %s", data)
}

// docs/config.md lists every config field and environment variable.
func TestConfigFieldNamesAreDocumented(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "../docs/config.md")
	var walk func(ct reflect.Type, path string)
	walk = func(ct reflect.Type, path string) {
		for _, f := range configFields(ct) {
			p := joinGo(path, f.name)
			assert.Contains(t, doc, "`"+p+"`", "docs/config.md lists %s", p)
			if ft := ct.Field(f.index).Type; ft.Kind() == reflect.Struct {
				walk(ft, p)
			}
		}
	}
	walk(reflect.TypeFor[Policy](), "")
	for _, v := range envVars {
		assert.Contains(t, doc, "`<PREFIX>_"+v.name+"`", "docs/config.md lists the variable")
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
