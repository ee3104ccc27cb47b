package httpretry

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// Config is the data part of a Transport, for reading from a file: the
// fields of Transport.Policy at the top level, and Hosts. Its JSON and YAML
// field names are those of its tags ("max_attempts", "hosts", …), and every
// value is a number, a string, a boolean, a list or a section; durations are
// strings such as "250ms" (see Duration). docs/config.md lists every field.
//
// What is not data stays code: Base, Logger, OnAttempt, OnCall, and the
// functions of a Policy (Classify, PrepareRetry, Keys.New, a Budget of your
// own). Build the Transport with Transport, then set them on it before its
// first use.
//
// An omitted field is the zero value of the Policy field it maps to, so a
// host's entry inherits exactly as Transport.Hosts entries do. The zero
// Config builds the zero Transport: the default policy for every host.
type Config struct {
	PolicyConfig `yaml:",inline"`

	// Hosts holds policies per host and per endpoint, keyed exactly as
	// Transport.Hosts: "host", "host:port" or "*.suffix", optionally
	// followed by a path prefix ("api.example.com/v1/search"). Nil means
	// none.
	Hosts map[string]PolicyConfig `json:"hosts,omitempty" yaml:"hosts,omitempty"`
}

// Transport builds a Transport from c, or reports every problem with c at
// once, each naming its field path in the config's own names
// (hosts["api.example.com"].max_attempts) and wrapping ErrInvalidConfig or
// ErrInvalidPolicy. The checks are those of (*Transport).Validate.
//
// The Transport has not been used: set Base, Logger, OnAttempt, OnCall and
// any function of its Policy or of an entry of its Hosts before its first
// request, then call Validate as usual.
func (c Config) Transport() (*Transport, error) {
	var e errList
	p, hosts := c.build(&e)
	if err := e.err(); err != nil {
		return nil, err
	}
	return &Transport{Policy: p, Hosts: hosts}, nil
}

// build converts and validates c, adding its problems to e.
func (c Config) build(e *errList) (Policy, map[string]Policy) {
	p := e.toPolicy(c.PolicyConfig, "")
	var hosts map[string]Policy
	if c.Hosts != nil {
		hosts = make(map[string]Policy, len(c.Hosts))
		for _, key := range slices.Sorted(maps.Keys(c.Hosts)) {
			hosts[key] = e.toPolicy(c.Hosts[key], hostPath(key))
		}
	}
	e.validated(&Transport{Base: noBase{}, Policy: p, Hosts: hosts})
	return p, hosts
}

// Policy builds the Policy c describes, or reports every problem with it,
// as Config.Transport does. Its function fields are nil: set them on the
// result. On a Config, Policy builds the top-level policy only; Transport
// builds Hosts too.
func (c PolicyConfig) Policy() (Policy, error) {
	var e errList
	p := e.toPolicy(c, "")
	e.validated(&Transport{Base: noBase{}, Policy: p})
	if err := e.err(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Apply returns p with every field that c sets replaced by c's value, as a
// Transport.Hosts entry overrides Transport.Policy: sections (keys, budget,
// breaker, hedge, hints, backoff) replace the whole sub-policy. p's
// functions are kept. It reports the problems of c as Policy does.
func (c PolicyConfig) Apply(p Policy) (Policy, error) {
	over, err := c.Policy()
	if err != nil {
		return p, err
	}
	return over.inherit(p), nil
}

// Over returns c with every field it leaves zero taken from base: c's
// settings win. Sections are taken as a whole.
func (c PolicyConfig) Over(base PolicyConfig) PolicyConfig {
	inheritZero(&c, base)
	return c
}

// ConfigOf returns the Config of t's Policy and Hosts, the inverse of
// Config.Transport: building the result gives a Transport that behaves as
// t does, once the functions are set again. It leaves out what is code
// (see PolicyConfigOf) and fails for a Backoff or NewBudget that has no
// config form.
func ConfigOf(t *Transport) (Config, error) {
	var e errList
	c := Config{PolicyConfig: e.fromPolicy(t.Policy, "")}
	if t.Hosts != nil {
		c.Hosts = make(map[string]PolicyConfig, len(t.Hosts))
		for _, key := range slices.Sorted(maps.Keys(t.Hosts)) {
			c.Hosts[key] = e.fromPolicy(t.Hosts[key], hostPath(key))
		}
	}
	return c, e.err()
}

// PolicyConfigOf returns the PolicyConfig of p, the inverse of
// PolicyConfig.Policy. It leaves out the fields that are functions
// (Classify, PrepareRetry, Keys.New), and fails for a Backoff other than
// backoff.Exponential, backoff.Linear, backoff.Decorrelated and
// backoff.Constant, and for a NewBudget other than nil, DefaultBudget and
// NoBudget: a budget built from numbers is a closure whose numbers cannot
// be read back.
func PolicyConfigOf(p Policy) (PolicyConfig, error) {
	var e errList
	c := e.fromPolicy(p, "")
	return c, e.err()
}

// hostPath names a Hosts entry in errors.
func hostPath(key string) string { return fmt.Sprintf("hosts[%q]", key) }

// noBase stands in for Base while a configuration is validated, so that
// validating creates no connection pool.
type noBase struct{}

func (noBase) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("httpretry: validation only")
}
