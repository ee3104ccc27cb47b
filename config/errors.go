package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/seedhq/httpretry"
)

// ErrInvalid reports a configuration that cannot be read as a Policy:
// malformed JSON, an unknown or repeated field, a value of the wrong type,
// a duration or name that does not parse, a field that does not apply (a
// ratio budget's numbers on a token bucket). Values that parse but make no
// sense as a policy wrap httpretry.ErrInvalidPolicy instead, as
// (*httpretry.Transport).Validate reports them.
var ErrInvalid = errors.New("httpretry: invalid config")

// Error is one problem with a configuration. Parse, File.Transport,
// Policy.Policy, Policy.Apply and FromEnv report every problem at once,
// joined with errors.Join: errors.As finds the first, and the joined
// error's Unwrap() []error lists them all.
type Error struct {
	// Path locates the problem in the configuration's own names, one
	// element per step: a field ("max_attempts"), or a map key or list
	// index in brackets (`["api.example.com"]`, "[1]"). For FromEnv it
	// is the variable's name. Empty means the input as a whole.
	Path []string

	// Err is ErrInvalid for a value that cannot be read, or
	// httpretry.ErrInvalidPolicy for one that makes no sense as a policy.
	Err error

	// Msg says what is wrong.
	Msg string
}

// Error writes the problem on one line, its path as it would be written
// in code: hosts["api.example.com"].keys.methods[1].
func (e *Error) Error() string {
	if len(e.Path) == 0 {
		return e.Err.Error() + ": " + e.Msg
	}
	return e.Err.Error() + ": " + pathString(e.Path) + ": " + e.Msg
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func pathString(path []string) string {
	var b strings.Builder
	for i, el := range path {
		if i > 0 && !strings.HasPrefix(el, "[") {
			b.WriteByte('.')
		}
		b.WriteString(el)
	}
	return b.String()
}

// under returns path with elems appended, sharing nothing with path.
func under(path []string, elems ...string) []string {
	return append(path[:len(path):len(path)], elems...)
}

// mapKey is the path element of a map key.
func mapKey(k string) string { return fmt.Sprintf("[%q]", k) }

// errList collects every problem with a configuration.
type errList struct {
	errs []error
}

// config reports a value that cannot be read.
func (e *errList) config(path []string, format string, args ...any) {
	e.errs = append(e.errs, &Error{path, ErrInvalid, fmt.Sprintf(format, args...)})
}

// policy reports a value that makes no sense as a policy.
func (e *errList) policy(path []string, format string, args ...any) {
	e.errs = append(e.errs, &Error{path, httpretry.ErrInvalidPolicy, fmt.Sprintf(format, args...)})
}

func (e *errList) err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return errors.Join(e.errs...)
}

// validated adds the problems (*Transport).Validate finds in t, a Transport
// built from a configuration, with their paths in the configuration's
// names. The rules are Validate's own; only the names change, mapped
// field by field from each PolicyError's Path.
func (e *errList) validated(t *httpretry.Transport) {
	err := t.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		var pe *httpretry.PolicyError
		if !errors.As(err, &pe) {
			e.errs = append(e.errs, err)
			continue
		}
		e.errs = append(e.errs, &Error{configPath(pe.Path), httpretry.ErrInvalidPolicy, pe.Message(configName)})
	}
}

// validatedEntry adds the problems Validate finds in p as the entry of an
// exact host key, with their paths from the entry down.
func (e *errList) validatedEntry(p httpretry.Policy) {
	const key = "entry.invalid"
	var entry errList
	entry.validated(&httpretry.Transport{Base: noBase{}, Hosts: map[string]httpretry.Policy{key: p}})
	prefix := configPath([]string{"Hosts", key})
	for _, err := range entry.errs {
		if ce, ok := err.(*Error); ok && len(ce.Path) >= len(prefix) && slices.Equal(ce.Path[:len(prefix)], prefix) {
			ce.Path = ce.Path[len(prefix):]
		}
		e.errs = append(e.errs, err)
	}
}

// configPath maps the path of a PolicyError, in Go's names from the
// Transport down, to the configuration's:
// {"Hosts", "a.example.com", "Keys", "Methods", "1"} is
// {"hosts", `["a.example.com"]`, "keys", "methods", "[1]"}.
func configPath(goPath []string) []string {
	var path, fields []string
	switch goPath[0] {
	case "Hosts":
		path, fields = []string{"hosts", mapKey(goPath[1])}, goPath[2:]
	default: // "Policy"
		fields = goPath[1:]
	}
	t := reflect.TypeFor[Policy]()
	for _, f := range fields {
		if f != "" && f[0] >= '0' && f[0] <= '9' {
			path = append(path, "["+f+"]")
			continue
		}
		cf, ok := configFieldFor(t, f)
		if !ok { // not a config field: keep the Go name
			path, t = append(path, f), nil
			continue
		}
		path, t = append(path, cf.name), t.Field(cf.index).Type
	}
	return path
}

// configName names a setting a PolicyError's message mentions, given its
// path as PolicyError.Path, in the configuration's words.
func configName(goPath []string) string {
	if len(goPath) == 1 && goPath[0] == "Policy" {
		return "the top-level policy"
	}
	path := configPath(goPath)
	return path[len(path)-1]
}

// configFieldFor finds the field of the config struct t that carries the
// Policy field goName.
func configFieldFor(t reflect.Type, goName string) (configField, bool) {
	if t == nil || t.Kind() != reflect.Struct {
		return configField{}, false
	}
	for _, f := range configFields(t) {
		if f.policy == goName {
			return f, true
		}
	}
	return configField{}, false
}
