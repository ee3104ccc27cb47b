package httpretry

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/http"
)

// Validate reports every invalid Hosts key and Policy value of the
// Transport at once, each error naming its field path (for example
// Transport.Hosts["api.example.com"].MaxAttempts) and wrapping
// ErrInvalidPolicy. Call it at start-up, once every field is set, to fail
// fast: RoundTrip fails every request with the same errors until the
// configuration is fixed. A nil error means every request can be sent.
// Validate is a first use: the Transport reads its fields then, once, and
// changes made after it are not seen.
func (t *Transport) Validate() error {
	t.init()
	return t.hosts.err
}

// invalidf returns an error wrapping ErrInvalidPolicy for the field at path.
func invalidf(path, format string, args ...any) error {
	return &fieldError{ErrInvalidPolicy, path, fmt.Sprintf(format, args...)}
}

// fieldErrors collects the errors of the fields under path.
type fieldErrors struct {
	path string
	errs []error
}

// bad adds an error for the field of path called field.
func (fe *fieldErrors) bad(field, format string, args ...any) {
	fe.errs = append(fe.errs, invalidf(fe.path+"."+field, format, args...))
}

// check reports the fields of p that are invalid on their own, each named
// under path.
func (p *Policy) check(path string) []error {
	fe := fieldErrors{path: path}
	header := func(field, name string) {
		if name != "" && !validToken(name) {
			fe.bad(field, "%q is not a valid header name", name)
		}
	}
	if p.MaxAttempts < 0 {
		fe.bad("MaxAttempts", "%d is negative", p.MaxAttempts)
	}
	if v, ok := p.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			fe.bad("Backoff", "%v", err)
		}
	}
	if p.MaxRetryAfter < 0 {
		fe.bad("MaxRetryAfter", "%v is negative", p.MaxRetryAfter)
	}
	header("AttemptHeader", p.AttemptHeader)
	header("Keys.Header", p.Keys.Header)
	for i, m := range p.Keys.Methods {
		if !validToken(m) {
			fe.bad(fmt.Sprintf("Keys.Methods[%d]", i), "%q is not a valid method", m)
		}
	}
	header("Hints.ShouldRetryHeader", p.Hints.ShouldRetryHeader)
	header("Hints.ResetHeader", p.Hints.ResetHeader)
	header("Hints.RemainingHeader", p.Hints.RemainingHeader)
	if p.Hints.RemainingHeader != "" && p.Hints.ResetHeader == "" {
		fe.bad("Hints.RemainingHeader", "is read only with ResetHeader, which is not set")
	}
	if f := p.Hints.ResetFormat; f != ResetDeltaSeconds && f != ResetEpochSeconds {
		fe.bad("Hints.ResetFormat", "%d is not a known format", f)
	}
	if p.Hedge.Delay < 0 {
		fe.bad("Hedge.Delay", "%v is negative", p.Hedge.Delay)
	}
	if p.Hedge.MaxHedges < 0 {
		fe.bad("Hedge.MaxHedges", "%d is negative", p.Hedge.MaxHedges)
	}
	fe.errs = append(fe.errs, p.Hedge.check(path+".Hedge")...)
	fe.errs = append(fe.errs, p.Breaker.check(path+".Breaker")...)
	fe.errs = append(fe.errs, p.Overload.check(path+".Overload")...)
	return fe.errs
}

// checkMerged reports the combinations of fields that are invalid in the
// policy that applies, p, which has inherited what it left zero.
func (p *Policy) checkMerged(path string) error {
	if p.AttemptHeader == "" {
		return nil
	}
	ah := http.CanonicalHeaderKey(p.AttemptHeader)
	kh := http.CanonicalHeaderKey(p.Keys.Header)
	if ah == kh || ah == "Idempotency-Key" || ah == "X-Idempotency-Key" {
		return invalidf(path+".AttemptHeader", "%q would overwrite idempotency keys with attempt numbers", p.AttemptHeader)
	}
	return nil
}

// check reports the adaptive hedging settings that are invalid, or set
// without Adaptive, where they would be ignored.
func (h *HedgePolicy) check(path string) []error {
	fe := fieldErrors{path: path}
	if q := h.Quantile; q != 0 && !(q > 0 && q < 1) {
		fe.bad("Quantile", "%v is not in (0, 1)", q)
	}
	if h.MinSamples < 0 {
		fe.bad("MinSamples", "%d is negative", h.MinSamples)
	}
	if h.MinDelay < 0 {
		fe.bad("MinDelay", "%v is negative", h.MinDelay)
	}
	if h.MaxDelay < 0 {
		fe.bad("MaxDelay", "%v is negative", h.MaxDelay)
	}
	if h.MinDelay > 0 && h.MaxDelay > 0 && h.MinDelay > h.MaxDelay {
		fe.bad("MinDelay", "%v is above MaxDelay (%v)", h.MinDelay, h.MaxDelay)
	}
	if !h.Adaptive && !h.Disabled && len(fe.errs) == 0 {
		for _, f := range []struct {
			name string
			set  bool
		}{{"Quantile", h.Quantile != 0}, {"MinSamples", h.MinSamples != 0}, {"MinDelay", h.MinDelay != 0}, {"MaxDelay", h.MaxDelay != 0}} {
			if f.set {
				fe.bad(f.name, "is set without Adaptive, which it needs")
			}
		}
	}
	return fe.errs
}

// check reports nonsense breaker settings.
func (b *BreakerPolicy) check(path string) []error {
	if b.Disabled || *b == (BreakerPolicy{}) {
		return nil
	}
	fe := fieldErrors{path: path}
	if b.ConsecutiveFailures < 0 {
		fe.bad("ConsecutiveFailures", "%d is negative", b.ConsecutiveFailures)
	}
	if !(b.FailureRatio >= 0 && b.FailureRatio <= 1) || math.IsNaN(b.FailureRatio) {
		fe.bad("FailureRatio", "%v is not in [0, 1]", b.FailureRatio)
	}
	if b.MinRequests < 0 {
		fe.bad("MinRequests", "%d is negative", b.MinRequests)
	}
	if b.Window < 0 {
		fe.bad("Window", "%v is negative", b.Window)
	}
	if b.OpenFor < 0 {
		fe.bad("OpenFor", "%v is negative", b.OpenFor)
	}
	if b.HalfOpenAttempts < 0 {
		fe.bad("HalfOpenAttempts", "%d is negative", b.HalfOpenAttempts)
	}
	if b.ConsecutiveFailures == 0 && b.FailureRatio == 0 {
		fe.errs = append(fe.errs, invalidf(path, "no trip rule: set ConsecutiveFailures or FailureRatio (or Disabled)"))
	}
	return fe.errs
}

// check reports nonsense overload settings, and tuning of a control that
// is off, which would otherwise be silently ignored.
func (o *OverloadPolicy) check(path string) []error {
	if *o == (OverloadPolicy{}) {
		return nil
	}
	fe := fieldErrors{path: path}
	if k := o.ThrottleK; k != 0 && !(k >= 1 && !math.IsInf(k, 1)) {
		fe.bad("ThrottleK", "%v is not a finite number of at least 1", k)
	}
	if o.ThrottleWindow < 0 {
		fe.bad("ThrottleWindow", "%v is negative", o.ThrottleWindow)
	}
	if o.LimitMax < 0 {
		fe.bad("LimitMax", "%d is negative", o.LimitMax)
	}
	if o.LimitMin < 0 {
		fe.bad("LimitMin", "%d is negative", o.LimitMin)
	} else if m := cmp.Or(o.LimitMax, defaultLimitMax); o.LimitMin > m {
		fe.bad("LimitMin", "%d is above LimitMax (%d)", o.LimitMin, m)
	}
	if o.Disabled {
		return fe.errs
	}
	tuned := func(field string, set bool, control string, on bool) {
		if set && !on {
			fe.bad(field, "is set but %s is off", control)
		}
	}
	tuned("ThrottleK", o.ThrottleK != 0, "Throttle", o.Throttle)
	tuned("ThrottleWindow", o.ThrottleWindow != 0, "Throttle", o.Throttle)
	tuned("LimitMax", o.LimitMax != 0, "Limit", o.Limit)
	tuned("LimitMin", o.LimitMin != 0, "Limit", o.Limit)
	tuned("LimitQueue", o.LimitQueue != 0, "Limit", o.Limit)
	tuned("PaceFailFast", o.PaceFailFast, "Pace", o.Pace)
	return fe.errs
}

// joinUnique joins errs, dropping repeats of the same text: a policy
// compiled under several parents reports each problem once.
func joinUnique(errs []error) error {
	seen := make(map[string]bool, len(errs))
	out := errs[:0]
	for _, err := range errs {
		if s := err.Error(); !seen[s] {
			seen[s] = true
			out = append(out, err)
		}
	}
	return errors.Join(out...)
}

// fieldPath names a Hosts entry in errors.
func fieldPath(key string) string {
	if key == "" {
		return "Transport.Policy"
	}
	return fmt.Sprintf("Transport.Hosts[%q]", key)
}
