// Package config is httpretry's configuration format: the data part of a
// Transport, read from JSON (Parse), from YAML with any library that honours
// struct tags, or from environment variables (FromEnv), with every problem
// reported at once at its path in the configuration's own names.
//
//	cfg, err := config.Parse(data)
//	...
//	env, err := config.FromEnv("PAYMENTS_HTTP")
//	...
//	t, err := cfg.Override(env).Transport()
//
// What is not data stays code: set Base, Logger, the hooks and the
// functions of a Policy on the Transport before its first request. A
// program that reads no configuration does not compile this package.
// docs/config.md lists every field.
package config

import (
	"errors"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/seedhq/httpretry"
)

// File is the data part of an httpretry.Transport, for reading from a
// file: the fields of Transport.Policy at the top level, and Hosts. Its
// JSON and YAML field names are those of its tags ("max_attempts",
// "hosts", …), and every value is a number, a string, a boolean, a list or
// a section; durations are strings such as "250ms" (see Duration).
//
// What is not data stays code: Base, Logger, OnAttempt, OnCall, and the
// functions of a Policy (Classify, PrepareRetry, Keys.New, a Budget of your
// own). Build the Transport with Transport, then set them on it before its
// first use.
//
// An omitted field is the zero value of the httpretry.Policy field it maps
// to, so a host's entry inherits exactly as Transport.Hosts entries do. The
// zero File builds the zero Transport: the default policy for every host.
type File struct {
	Policy `yaml:",inline"`

	// Hosts holds policies per host and per endpoint, keyed exactly as
	// Transport.Hosts: "host", "host:port" or "*.suffix", optionally
	// followed by a path prefix ("api.example.com/v1/search"). Nil means
	// none.
	Hosts map[string]Policy `json:"hosts,omitempty" yaml:"hosts,omitempty"`
}

// Transport builds the Transport c describes, or reports every problem
// with c at once: values that do not parse or do not apply, wrapping
// ErrInvalid, and everything (*httpretry.Transport).Validate refuses,
// wrapping httpretry.ErrInvalidPolicy, each at its path in the
// configuration's names (hosts["api.example.com"].max_attempts). It
// converts c once and checks the result once, on a Transport of its own
// that opens no connection.
//
// The Transport returned has not been used: set Base, Logger, OnAttempt,
// OnCall and any function of its Policy or of an entry of its Hosts before
// its first request, then call Validate as usual.
func (c File) Transport() (*httpretry.Transport, error) {
	var e errList
	p := e.toPolicy(c.Policy, nil)
	var hosts map[string]httpretry.Policy
	if c.Hosts != nil {
		hosts = make(map[string]httpretry.Policy, len(c.Hosts))
		for _, k := range slices.Sorted(maps.Keys(c.Hosts)) {
			hosts[k] = e.toPolicy(c.Hosts[k], []string{"hosts", mapKey(k)})
		}
	}
	e.validated(&httpretry.Transport{Base: noBase{}, Policy: p, Hosts: hosts})
	if err := e.err(); err != nil {
		return nil, err
	}
	return &httpretry.Transport{Policy: p, Hosts: hosts}, nil
}

// Override returns c with every field that o sets put over the top level
// and over each Hosts entry that sets the field itself (entries that leave
// it out inherit it from the top level), so that each setting of o applies
// to every host. Sections are replaced whole. It is how environment
// variables (FromEnv) go over a file: an operator who sets
// PREFIX_MAX_ATTEMPTS=1 during an incident turns retries off for every
// host, not only for those without an entry of their own.
func (c File) Override(o Policy) File {
	c.Policy = o.Over(c.Policy)
	if c.Hosts != nil {
		hosts := make(map[string]Policy, len(c.Hosts))
		for k, h := range c.Hosts {
			overrideSet(&h, o)
			hosts[k] = h
		}
		c.Hosts = hosts
	}
	return c
}

// Policy builds the httpretry.Policy c describes, or reports every problem
// with it, as File.Transport does for a host's entry (endpoints included,
// which only a host's entry may set). Its function fields are nil: set
// them on the result.
func (c Policy) Policy() (httpretry.Policy, error) {
	var e errList
	p := e.toPolicy(c, nil)
	e.validatedEntry(p)
	if err := e.err(); err != nil {
		return httpretry.Policy{}, err
	}
	return p, nil
}

// Apply returns p with every field that c sets replaced by c's value, as a
// Transport.Hosts entry overrides Transport.Policy: sections (keys, budget,
// breaker, hedge, hints, backoff) replace the whole sub-policy. p's
// functions are kept, those inside a section too: a c that sets anything
// under keys replaces p.Keys but keeps p.Keys.New. It reports the problems
// of c as Policy does.
func (c Policy) Apply(p httpretry.Policy) (httpretry.Policy, error) {
	over, err := c.Policy()
	if err != nil {
		return p, err
	}
	inheritZero(&over, p)
	keepCode(&over, p)
	return over, nil
}

// keepCode sets each function of *dst listed in codeOnlyFields that is nil
// to that function of p: a config has no form for it, so a section that
// replaced its sub-policy did not mean to drop it.
func keepCode(dst *httpretry.Policy, p httpretry.Policy) {
	for _, path := range codeOnlyFields {
		d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(p)
		for name := range strings.SplitSeq(path, ".") {
			d, s = d.FieldByName(name), s.FieldByName(name)
		}
		if d.IsNil() {
			d.Set(s)
		}
	}
}

// Over returns c with every field it leaves zero taken from base: c's
// settings win. Sections are taken as a whole.
func (c Policy) Over(base Policy) Policy {
	inheritZero(&c, base)
	return c
}

// Of returns the File of t's Policy and Hosts, the inverse of
// File.Transport: building the result gives a Transport that behaves as t
// does, once the functions are set again. It leaves out what is code (see
// PolicyOf) and fails for a Backoff or NewBudget that has no config form.
func Of(t *httpretry.Transport) (File, error) {
	var e errList
	c := File{Policy: e.fromPolicy(t.Policy, nil)}
	if t.Hosts != nil {
		c.Hosts = make(map[string]Policy, len(t.Hosts))
		for _, k := range slices.Sorted(maps.Keys(t.Hosts)) {
			c.Hosts[k] = e.fromPolicy(t.Hosts[k], []string{"hosts", mapKey(k)})
		}
	}
	return c, e.err()
}

// PolicyOf returns the Policy of p, the inverse of Policy.Policy. It leaves
// out the fields that are functions (Classify, PrepareRetry, Keys.New), and
// fails for a Backoff other than backoff.Exponential, backoff.Linear,
// backoff.Decorrelated and backoff.Constant, and for a NewBudget other than
// nil, httpretry.DefaultBudget and httpretry.NoBudget: a budget built from
// numbers is a closure whose numbers cannot be read back.
func PolicyOf(p httpretry.Policy) (Policy, error) {
	var e errList
	c := e.fromPolicy(p, nil)
	return c, e.err()
}

// noBase stands in for Base while a configuration is validated, so that
// validating creates no connection pool.
type noBase struct{}

func (noBase) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("httpretry: validation only")
}

// inheritZero sets every field of the struct *dst that is zero to that
// field of parent, a value of the same struct type. Over httpretry.Policy
// it is the Transport's own inheritance: scalars and functions one by one,
// sub-policies whole.
func inheritZero[T any](dst *T, parent T) {
	c, pv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(parent)
	for i := range c.NumField() {
		if c.Field(i).IsZero() {
			c.Field(i).Set(pv.Field(i))
		}
	}
}

// overrideSet sets every field of the struct *dst that is not zero, and
// that over sets, to over's.
func overrideSet[T any](dst *T, over T) {
	c, ov := reflect.ValueOf(dst).Elem(), reflect.ValueOf(over)
	for i := range c.NumField() {
		if !c.Field(i).IsZero() && !ov.Field(i).IsZero() {
			c.Field(i).Set(ov.Field(i))
		}
	}
}
