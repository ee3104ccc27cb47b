package httpretry

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// errList collects every problem with a configuration.
type errList struct {
	errs []error
}

// config reports a value that cannot be read.
func (e *errList) config(path, format string, args ...any) {
	e.errs = append(e.errs, &fieldError{ErrInvalidConfig, path, fmt.Sprintf(format, args...)})
}

// policy reports a value that makes no sense as a policy.
func (e *errList) policy(path, format string, args ...any) {
	e.errs = append(e.errs, &fieldError{ErrInvalidPolicy, path, fmt.Sprintf(format, args...)})
}

func (e *errList) err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return errors.Join(e.errs...)
}

// validated adds the problems (*Transport).Validate finds in t, a Transport
// built from a Config, with their field paths in the config's names. The
// rules are Validate's own; only the names change.
func (e *errList) validated(t *Transport) {
	err := t.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		if fe := renamePolicyError(err); fe != nil {
			e.errs = append(e.errs, fe)
		} else {
			e.errs = append(e.errs, err)
		}
	}
}

// renamePolicyError rewrites an error of (*Transport).Validate, a
// *fieldError at a path such as Transport.Hosts["k"].Keys.Header, with the
// config's names: hosts["k"].keys.header. It returns nil for an
// error it cannot read, which is then kept as it is.
func renamePolicyError(err error) *fieldError {
	var fe *fieldError
	if !errors.As(err, &fe) || fe.kind != ErrInvalidPolicy {
		return nil
	}
	rest := fe.path
	var path string
	switch {
	case strings.HasPrefix(rest, "Transport.Policy"):
		rest = rest[len("Transport.Policy"):]
	case strings.HasPrefix(rest, "Transport.Hosts["):
		rest = rest[len("Transport.Hosts["):]
		q, err := strconv.QuotedPrefix(rest)
		if err != nil || !strings.HasPrefix(rest[len(q):], "]") {
			return nil
		}
		key, _ := strconv.Unquote(q)
		path = hostPath(key)
		rest = rest[len(q)+1:]
	default:
		return nil
	}
	t := reflect.TypeFor[PolicyConfig]()
	var container reflect.Type // the config struct holding the last field
	for len(rest) > 0 && rest[0] != ':' {
		switch rest[0] {
		case '.':
			n := 1
			for n < len(rest) && isIdentByte(rest[n]) {
				n++
			}
			goName := rest[1:n]
			rest = rest[n:]
			name := goName
			container = t
			if f, ok := configFieldFor(t, goName); ok {
				name = f.name
				t = t.Field(f.index).Type
			} else {
				t = nil
			}
			path = joinPath(path, name)
		case '[':
			i := strings.IndexByte(rest, ']')
			if i < 0 {
				return nil
			}
			path += rest[:i+1]
			rest = rest[i+1:]
		default:
			return nil
		}
	}
	if rest != "" {
		return nil
	}
	return &fieldError{ErrInvalidPolicy, path, renameMessage(fe.msg, t, container)}
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
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

// renameMessage rewrites the Go names a Validate message mentions: the
// fields of the struct at the error's path (a breaker without a trip rule
// names ConsecutiveFailures) or beside it, and Transport.Policy. A
// backoff's several problems, one a line, become one line.
func renameMessage(msg string, types ...reflect.Type) string {
	if strings.Contains(msg, "\n") || strings.HasPrefix(msg, "backoff: ") {
		lines := strings.Split(msg, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "backoff: ")
		}
		msg = strings.Join(lines, "; ")
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		switch c := msg[i]; {
		case c == '"':
			q, err := strconv.QuotedPrefix(msg[i:])
			if err != nil {
				q = msg[i:]
			}
			b.WriteString(q)
			i += len(q)
		case isIdentByte(c) || c == '.':
			n := i + 1
			for n < len(msg) && (isIdentByte(msg[n]) || msg[n] == '.') {
				n++
			}
			b.WriteString(renameWord(msg[i:n], types))
			i = n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func renameWord(w string, types []reflect.Type) string {
	if w == "Transport.Policy" {
		return "the top-level policy"
	}
	for _, t := range types {
		if f, ok := configFieldFor(t, w); ok {
			return f.name
		}
	}
	return w
}
