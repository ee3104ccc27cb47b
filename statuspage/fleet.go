package statuspage

import (
	"bytes"
	"encoding/json"
	"expvar"
	"fmt"
	"unicode/utf8"

	"github.com/seedhq/httpretry"
)

// fleetView is the state a Transport's Fleet reports, as the page shows
// it: the fields of the JSON object its String returns, in order, or the
// problem with it.
type fleetView struct {
	Fields  []fleetField
	Raw     json.RawMessage // the object, for the JSON form; nil with a Problem
	Problem string
}

type fleetField struct{ Name, Value string }

// Bounds on what a Fleet's String may put on the page: the page stays
// bounded whatever a Fleet of the user's returns.
const (
	maxFleetFields = 32
	maxFleetValue  = 200 // bytes of one value
	maxFleetJSON   = 16 << 10
)

// fleetOf returns the state that f reports when it is an expvar.Var, nil
// when it is none (or f is nil).
func fleetOf(f httpretry.Fleet) *fleetView {
	v, ok := f.(expvar.Var)
	if !ok || v == nil {
		return nil
	}
	s, problem := fleetString(v)
	if problem != "" {
		return &fleetView{Problem: problem}
	}
	fields, ok := objectFields([]byte(s))
	if !ok {
		return &fleetView{Problem: "its String is not a JSON object of at most 32 fields"}
	}
	return &fleetView{Fields: fields, Raw: json.RawMessage(s)}
}

// fleetString calls v.String, which the user's code may implement: a
// panic in it is a problem to show, never a page that fails.
func fleetString(v expvar.Var) (s, problem string) {
	defer func() {
		if r := recover(); r != nil {
			s, problem = "", fmt.Sprintf("its String panicked: %.200v", r)
		}
	}()
	s = v.String()
	if len(s) > maxFleetJSON {
		return "", fmt.Sprintf("its String returned %d bytes, more than %d", len(s), maxFleetJSON)
	}
	return s, ""
}

// objectFields returns the fields of the JSON object b, in order, each
// value as JSON writes it (a string unquoted), and whether b is an object
// of at most maxFleetFields fields.
func objectFields(b []byte) ([]fleetField, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var fields []fleetField
	for dec.More() {
		k, err := dec.Token()
		name, isName := k.(string)
		var v json.RawMessage
		if err != nil || !isName || dec.Decode(&v) != nil || len(fields) == maxFleetFields {
			return nil, false
		}
		value := string(v)
		var str string
		if json.Unmarshal(v, &str) == nil {
			value = str
		}
		if len(value) > maxFleetValue {
			n := maxFleetValue
			for n > 0 && !utf8.RuneStart(value[n]) {
				n--
			}
			value = value[:n] + "…"
		}
		fields = append(fields, fleetField{Name: name, Value: value})
	}
	return fields, true
}

// json is v in the JSON form: the object its Fleet reported, or
// {"problem": ...}; nil, left out, when the Transport has no such Fleet.
func (v *fleetView) json() json.RawMessage {
	switch {
	case v == nil:
		return nil
	case v.Problem != "":
		b, _ := json.Marshal(map[string]string{"problem": v.Problem}) // a string always encodes
		return b
	}
	return v.Raw
}
