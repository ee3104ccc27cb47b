package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Parse reads a File from JSON and reports every problem with the JSON at
// once, each at its path and wrapping ErrInvalid: malformed JSON (with its
// line and column), unknown or repeated fields, values of the wrong type.
// Field names are exact: the lower-case names of the json tags. A JSON
// null is the same as an omitted field.
//
// The values are checked where the File is built, by File.Transport,
// which reports every problem left at once: a configuration is converted
// and checked once, after whatever goes over it (Override).
func Parse(data []byte) (File, error) {
	if err := syntaxError(data); err != nil {
		return File{}, err
	}
	var c File
	if err := unmarshalStrict(data, &c); err != nil {
		return File{}, err
	}
	return c, nil
}

// UnmarshalJSON decodes c strictly, as Parse does, so that a File inside
// a larger configuration is read the same way. Like Parse, it reports
// problems with the JSON (unknown fields, wrong types), not with the
// values: File.Transport does that.
func (c *File) UnmarshalJSON(data []byte) error { return unmarshalStrict(data, c) }

// UnmarshalJSON decodes c strictly, as File's UnmarshalJSON does.
func (c *Policy) UnmarshalJSON(data []byte) error { return unmarshalStrict(data, c) }

// unmarshalStrict decodes data into *dst, which it leaves alone on error.
func unmarshalStrict[T any](data []byte, dst *T) error {
	var e errList
	var v T
	e.decodeJSON(data, reflect.ValueOf(&v).Elem(), nil)
	if err := e.err(); err != nil {
		return err
	}
	*dst = v
	return nil
}

// syntaxError reports malformed JSON with its line and column.
func syntaxError(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	err := json.Unmarshal(data, new(any))
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return &Error{nil, ErrInvalid, fmt.Sprintf("malformed JSON: %v", err)}
	}
	// Offset counts the bytes read, the offending one included; at the
	// end of the input there is none.
	off := min(max(int(se.Offset)-1, 0), len(data))
	if strings.HasPrefix(se.Error(), "unexpected end") {
		off = len(data)
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return &Error{nil, ErrInvalid, fmt.Sprintf("malformed JSON at line %d, column %d: %v", line, col, se)}
}

// decodeJSON decodes raw, a valid JSON value, into v, reporting unknown and
// repeated fields and values of the wrong type under path. It goes on past
// a problem, leaving that value zero.
func (e *errList) decodeJSON(raw []byte, v reflect.Value, path []string) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		members, ok := e.object(raw, v.Type(), path)
		if !ok {
			return
		}
		fields := jsonFields(v.Type())
		for _, m := range members {
			idx, ok := fields[m.key]
			if !ok {
				e.config(m.path, "unknown field")
				continue
			}
			e.decodeJSON(m.value, v.FieldByIndex(idx), m.path)
		}
	case reflect.Map:
		members, ok := e.object(raw, v.Type(), path)
		if !ok {
			return
		}
		for _, m := range members {
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			e.decodeJSON(m.value, elem, m.path)
			v.SetMapIndex(reflect.ValueOf(m.key).Convert(v.Type().Key()), elem)
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			e.wrongType(raw, v.Type(), path)
			return
		}
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		before := len(e.errs)
		for i, el := range elems {
			e.decodeJSON(el, s.Index(i), under(path, fmt.Sprintf("[%d]", i)))
		}
		if len(e.errs) == before { // else leave it out, rather than keep a zero element
			v.Set(s)
		}
	default:
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			e.wrongType(raw, v.Type(), path)
		}
	}
}

// member is one name and value of a JSON object, in document order.
type member struct {
	key   string
	path  []string // where it is, for errors
	value json.RawMessage
}

// object splits raw, which must be a JSON object, into its members,
// reporting a repeated name.
func (e *errList) object(raw []byte, t reflect.Type, path []string) ([]member, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		e.wrongType(raw, t, path)
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		e.wrongType(raw, t, path)
		return nil, false
	}
	var members []member
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		var value json.RawMessage
		if err != nil || !ok || dec.Decode(&value) != nil {
			e.config(path, "malformed JSON object")
			return nil, false
		}
		at := under(path, key)
		if t.Kind() == reflect.Map || !isFieldName(key) {
			at = under(path, mapKey(key))
		}
		if seen[key] {
			e.config(at, "appears twice")
			continue
		}
		seen[key] = true
		members = append(members, member{key, at, value})
	}
	return members, true
}

// isFieldName reports whether s can stand in a path unquoted.
func isFieldName(s string) bool {
	for i := range len(s) {
		if b := s[i]; !(b == '_' || b == '-' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return s != ""
}

// jsonFields maps the JSON names of struct type t to field indexes, with
// the fields of embedded structs as its own.
func jsonFields(t reflect.Type) map[string][]int {
	fields := make(map[string][]int)
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && name == "" {
			for n, idx := range jsonFields(sf.Type) {
				fields[n] = append([]int{i}, idx...)
			}
			continue
		}
		if name != "" && name != "-" {
			fields[name] = []int{i}
		}
	}
	return fields
}

// wrongType reports raw as the wrong type of value for t.
func (e *errList) wrongType(raw []byte, t reflect.Type, path []string) {
	var compact bytes.Buffer
	if json.Compact(&compact, raw) == nil {
		raw = compact.Bytes() // one line
	}
	got := []rune(string(raw))
	if len(got) > 40 {
		got = append(got[:37], []rune("...")...)
	}
	e.config(path, "want %s, got %s", describeType(t), string(got))
}

// describeType says what a value of config type t is written as.
func describeType(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration string such as "250ms"`
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "an object"
	case t.Kind() == reflect.Slice:
		return "a list of " + strings.TrimPrefix(describeType(t.Elem()), "a ") + "s"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	}
	return t.String()
}
