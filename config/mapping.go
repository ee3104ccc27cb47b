package config

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// The mapping between a config Policy and an httpretry.Policy is by Go field name: each
// field of a config struct carries the Policy field of the same name (or
// the one its policy tag names), and sections convert field by field into
// the sub-policy of the same name. Values convert by type: numbers, strings,
// booleans and lists as they are, a Duration to a time.Duration. Only the backoff and budget sections, which become
// a strategy and a function, are converted by code of their own.

// codeOnlyFields are the Policy fields that are functions and have no
// config form, as Go field paths within Policy.
var codeOnlyFields = []string{"Classify", "PrepareRetry", "Keys.New"}

// Names of backoff shapes and budget kinds.
const (
	shapeExponential  = "exponential"
	shapeLinear       = "linear"
	shapeConstant     = "constant"
	shapeDecorrelated = "decorrelated"

	budgetTokenBucket = "token-bucket"
	budgetDefault     = "default"
	budgetRatio       = "ratio"
	budgetNone        = "none"
)

var (
	shapeNames  = []string{shapeExponential, shapeLinear, shapeConstant, shapeDecorrelated}
	budgetKinds = []string{budgetTokenBucket, budgetDefault, budgetRatio, budgetNone}
	jitterNames = []string{backoff.NoJitter.String(), backoff.FullJitter.String(),
		backoff.EqualJitter.String(), backoff.PercentJitter.String()} // indexed by backoff.Jitter
)

// none is the Duration that turns a setting off where a field allows it.
const none Duration = "none"

// configField is one field of a config struct.
type configField struct {
	index  int
	name   string // its name in JSON and YAML
	policy string // the Go name of the Policy field it carries
	none   bool   // the Duration "none" means a negative Policy value
}

// configFields lists the fields of the config struct type t.
func configFields(t reflect.Type) []configField {
	fs := make([]configField, 0, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		pname, opt, _ := strings.Cut(sf.Tag.Get("policy"), ",")
		fs = append(fs, configField{index: i, name: name, policy: cmp.Or(pname, sf.Name), none: opt == "none"})
	}
	return fs
}

var (
	durationType       = reflect.TypeFor[Duration]()
	timeDurationType   = reflect.TypeFor[time.Duration]()
	backoffConfigType  = reflect.TypeFor[Backoff]()
	budgetConfigType   = reflect.TypeFor[Budget]()
	strategyType       = reflect.TypeFor[backoff.Strategy]()
	newBudgetType      = reflect.TypeFor[func(string) httpretry.Budget]()
	constantStrategyTy = reflect.TypeOf(backoff.Constant(0))
)

// toPolicy converts c, reporting its problems under path.
func (e *errList) toPolicy(c Policy, path []string) httpretry.Policy {
	var p httpretry.Policy
	e.structIn(reflect.ValueOf(c), reflect.ValueOf(&p).Elem(), path)
	return p
}

// structIn sets the fields of the policy struct dst from the config struct
// src. A zero config field leaves the Policy field zero.
func (e *errList) structIn(src, dst reflect.Value, path []string) {
	for _, f := range configFields(src.Type()) {
		v := src.Field(f.index)
		if v.IsZero() {
			continue
		}
		at := under(path, f.name)
		d := dst.FieldByName(f.policy)
		if !d.IsValid() {
			e.config(at, "internal error: no Policy field %s", f.policy)
			continue
		}
		e.valueIn(v, d, at, f.none)
	}
}

// valueIn sets dst, a Policy value, from src, a config value.
func (e *errList) valueIn(src, dst reflect.Value, path []string, noneOK bool) {
	switch {
	case src.Type() == backoffConfigType && dst.Type() == strategyType:
		if s := e.backoffIn(src.Interface().(Backoff), path); s != nil {
			dst.Set(reflect.ValueOf(s))
		}
	case src.Type() == budgetConfigType && dst.Type() == newBudgetType:
		if f := e.budgetIn(src.Interface().(Budget), path); f != nil {
			dst.Set(reflect.ValueOf(f))
		}
	case src.Type() == durationType && dst.Type() == timeDurationType:
		if noneOK && Duration(src.String()) == none {
			dst.SetInt(-1)
			return
		}
		d, _ := e.duration(Duration(src.String()), path)
		dst.SetInt(int64(d))
	case src.Kind() == reflect.Struct && dst.Kind() == reflect.Struct:
		e.structIn(src, dst, path)
	case src.Kind() == reflect.Slice && dst.Kind() == reflect.Slice && src.Type().Elem() == dst.Type().Elem():
		dst.Set(reflect.AppendSlice(reflect.MakeSlice(dst.Type(), 0, src.Len()), src))
	case src.Kind() == dst.Kind() && src.Type().ConvertibleTo(dst.Type()):
		dst.Set(src.Convert(dst.Type()))
	default:
		e.config(path, "internal error: no conversion from %v to %v", src.Type(), dst.Type())
	}
}

// fromPolicy converts p, reporting what has no config form under path.
func (e *errList) fromPolicy(p httpretry.Policy, path []string) Policy {
	var c Policy
	e.structOut(reflect.ValueOf(p), reflect.ValueOf(&c).Elem(), path, "")
	return c
}

// structOut sets the fields of the config struct dst from the policy struct
// src; goPath is src's path within Policy, for codeOnlyFields.
func (e *errList) structOut(src, dst reflect.Value, path []string, goPath string) {
	mapped := make(map[string]bool)
	for _, f := range configFields(dst.Type()) {
		mapped[f.policy] = true
		v := src.FieldByName(f.policy)
		if !v.IsValid() || v.IsZero() {
			continue
		}
		e.valueOut(v, dst.Field(f.index), under(path, f.name), joinGo(goPath, f.policy), f.none)
	}
	for i := range src.NumField() {
		name := src.Type().Field(i).Name
		full := joinGo(goPath, name)
		if !mapped[name] && !slices.Contains(codeOnlyFields, full) && !src.Field(i).IsZero() {
			e.config(under(path, name), "Policy.%s has no config form", full)
		}
	}
}

// valueOut sets dst, a config value, from src, a Policy value.
func (e *errList) valueOut(src, dst reflect.Value, path []string, goPath string, noneOK bool) {
	switch {
	case dst.Type() == backoffConfigType && src.Type() == strategyType:
		s, _ := src.Interface().(backoff.Strategy)
		dst.Set(reflect.ValueOf(e.backoffOut(s, path)))
	case dst.Type() == budgetConfigType && src.Type() == newBudgetType:
		f, _ := src.Interface().(func(string) httpretry.Budget)
		dst.Set(reflect.ValueOf(e.budgetOut(f, path)))
	case dst.Type() == durationType && src.Type() == timeDurationType:
		d := time.Duration(src.Int())
		if noneOK && d < 0 {
			dst.SetString(string(none))
			return
		}
		dst.SetString(string(formatDuration(d)))
	case src.Kind() == reflect.Struct && dst.Kind() == reflect.Struct:
		e.structOut(src, dst, path, goPath)
	case src.Kind() == reflect.Slice && dst.Kind() == reflect.Slice && src.Type().Elem() == dst.Type().Elem():
		dst.Set(reflect.AppendSlice(reflect.MakeSlice(dst.Type(), 0, src.Len()), src))
	case src.Kind() == dst.Kind() && src.Type().ConvertibleTo(dst.Type()):
		dst.Set(src.Convert(dst.Type()))
	default:
		e.config(path, "internal error: no conversion from %v to %v", src.Type(), dst.Type())
	}
}

// joinGo joins a Go field path within Policy, as codeOnlyFields writes it.
func joinGo(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// duration parses s, reporting a bad one under path.
func (e *errList) duration(s Duration, path []string) (time.Duration, bool) {
	d, err := time.ParseDuration(string(s))
	switch {
	case err == nil:
		return d, true
	case s == none:
		e.config(path, `"none" is not allowed here`)
	case isNumber(string(s)):
		e.config(path, "%q has no unit: write a duration such as %q", quoted(string(s)), quoted(string(s))+"s")
	default:
		e.config(path, `%q is not a duration such as "250ms" or "2s"`, quoted(string(s)))
	}
	return 0, false
}

// maxQuoted bounds how much of a bad value an error quotes: a value of a
// megabyte makes an error of a few dozen bytes, not of a megabyte.
const maxQuoted = 40

// quoted is s as an error quotes it: whole, or its start and "…".
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// formatDuration writes d as time.Duration.String does, without the zero
// units it ends with: "1m" rather than "1m0s".
func formatDuration(d time.Duration) Duration {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return Duration(s)
}

// name returns the index of s in names, or reports it under path and
// returns -1.
func (e *errList) name(s string, names []string, path []string) int {
	if i := slices.Index(names, s); i >= 0 {
		return i
	}
	e.config(path, "%q is not one of %s", quoted(s), strings.Join(names, ", "))
	return -1
}

// backoffIn builds the strategy c describes, taking what it leaves out from
// backoff.Default().
func (e *errList) backoffIn(c Backoff, path []string) backoff.Strategy {
	at := func(field string) []string { return under(path, field) }
	def := backoff.Default()
	shape := cmp.Or(c.Shape, shapeExponential)
	if e.name(shape, shapeNames, at("shape")) < 0 {
		return nil
	}
	if c.Factor != 0 && shape != shapeExponential {
		e.config(at("factor"), "applies to the exponential shape only")
	}
	if c.Step != "" && shape != shapeLinear {
		e.config(at("step"), "applies to the linear shape only")
	}
	jitter, capd := def.Jitter.String(), def.Cap
	if shape == shapeConstant {
		jitter, capd = backoff.NoJitter.String(), 0
	}
	j := backoff.NoJitter
	if shape == shapeDecorrelated {
		if c.Jitter != "" {
			e.config(at("jitter"), "the decorrelated shape is random already and takes no jitter")
		}
	} else if i := e.name(cmp.Or(c.Jitter, jitter), jitterNames, at("jitter")); i >= 0 {
		j = backoff.Jitter(i)
	}
	if c.Percent != 0 && j != backoff.PercentJitter {
		e.config(at("percent"), `applies to jitter "percent" only`)
	}
	durationOr := func(s Duration, def time.Duration, field string) time.Duration {
		if s == "" {
			return def
		}
		d, _ := e.duration(s, at(field))
		return d
	}
	base := durationOr(c.Base, def.Base, "base")
	if c.Cap == none {
		capd = 0
	} else {
		capd = durationOr(c.Cap, capd, "cap")
	}
	switch shape {
	case shapeLinear:
		return backoff.Linear{Base: base, Step: durationOr(c.Step, base, "step"), Cap: capd, Jitter: j, Percent: c.Percent}
	case shapeConstant:
		return backoff.Linear{Base: base, Cap: capd, Jitter: j, Percent: c.Percent}
	case shapeDecorrelated:
		return backoff.Decorrelated{Base: base, Cap: capd}
	}
	return backoff.Exponential{Base: base, Factor: cmp.Or(c.Factor, def.Factor), Cap: capd, Jitter: j, Percent: c.Percent}
}

// backoffOut describes s, writing every field so that the result does not
// depend on the defaults.
func (e *errList) backoffOut(s backoff.Strategy, path []string) Backoff {
	capOut := func(d time.Duration) Duration {
		if d == 0 {
			return none
		}
		return formatDuration(d)
	}
	jitterOut := func(j backoff.Jitter) string {
		if j < 0 || int(j) >= len(jitterNames) {
			e.policy(under(path, "jitter"), "%v has no name", j)
			return ""
		}
		return jitterNames[j]
	}
	percentOut := func(j backoff.Jitter, p float64) float64 {
		if j != backoff.PercentJitter {
			return 0 // unused by the strategy
		}
		return p
	}
	switch s := s.(type) {
	case backoff.Exponential:
		return Backoff{Shape: shapeExponential, Base: formatDuration(s.Base), Factor: s.Factor,
			Cap: capOut(s.Cap), Jitter: jitterOut(s.Jitter), Percent: percentOut(s.Jitter, s.Percent)}
	case backoff.Linear:
		if s.Step == 0 {
			c := Backoff{Shape: shapeConstant, Base: formatDuration(s.Base), Jitter: jitterOut(s.Jitter),
				Percent: percentOut(s.Jitter, s.Percent)}
			if s.Cap != 0 {
				c.Cap = formatDuration(s.Cap)
			}
			return c
		}
		return Backoff{Shape: shapeLinear, Base: formatDuration(s.Base), Step: formatDuration(s.Step),
			Cap: capOut(s.Cap), Jitter: jitterOut(s.Jitter), Percent: percentOut(s.Jitter, s.Percent)}
	case backoff.Decorrelated:
		return Backoff{Shape: shapeDecorrelated, Base: formatDuration(s.Base), Cap: capOut(s.Cap)}
	}
	if reflect.TypeOf(s) == constantStrategyTy {
		return Backoff{Shape: shapeConstant, Base: formatDuration(time.Duration(reflect.ValueOf(s).Int()))}
	}
	e.config(path, "a %T has no config form", s)
	return Backoff{}
}
