package httpretry

import (
	"cmp"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seedhq/httpretry/internal/hostkey"
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

// invalidf returns the PolicyError of the setting at path. An argument
// that is a settingRef is a setting the message names.
func invalidf(path []string, format string, args ...any) *PolicyError {
	return &PolicyError{Path: path, format: format, args: args}
}

// under returns path with elems appended, sharing nothing with path.
func under(path []string, elems ...string) []string {
	return append(slices.Clip(path), elems...)
}

// fieldErrors collects the errors of the fields under path.
type fieldErrors struct {
	path []string
	errs []error
}

// bad adds an error for the field of path called field: one name, or a
// sub-policy's and its field's.
func (fe *fieldErrors) bad(field []string, format string, args ...any) {
	fe.errs = append(fe.errs, invalidf(under(fe.path, field...), format, args...))
}

// fields names a field of the struct at fe's path, for bad.
func fields(names ...string) []string { return names }

// ref names a setting of the struct at fe's path in a message.
func (fe *fieldErrors) ref(names ...string) settingRef { return under(fe.path, names...) }

// check reports the fields of p that are invalid on their own, each named
// under path.
func (p *Policy) check(path []string) []error {
	fe := fieldErrors{path: path}
	header := func(field []string, name string) {
		if name != "" && !validToken(name) {
			fe.bad(field, "%q is not a valid header name", name)
		}
	}
	if p.MaxAttempts < 0 {
		fe.bad(fields("MaxAttempts"), "%d is negative", p.MaxAttempts)
	}
	if v, ok := p.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			fe.bad(fields("Backoff"), "%s", oneLine(err, "backoff: "))
		}
	}
	if p.MaxRetryAfter < 0 {
		fe.bad(fields("MaxRetryAfter"), "%v is negative", p.MaxRetryAfter)
	}
	header(fields("AttemptHeader"), p.AttemptHeader)
	header(fields("Keys", "Header"), p.Keys.Header)
	for i, m := range p.Keys.Methods {
		if !validToken(m) {
			fe.bad(fields("Keys", "Methods", strconv.Itoa(i)), "%q is not a valid method", m)
		}
	}
	header(fields("Hints", "ShouldRetryHeader"), p.Hints.ShouldRetryHeader)
	header(fields("Hints", "ResetHeader"), p.Hints.ResetHeader)
	header(fields("Hints", "RemainingHeader"), p.Hints.RemainingHeader)
	if p.Hints.RemainingHeader != "" && p.Hints.ResetHeader == "" {
		fe.bad(fields("Hints", "RemainingHeader"), "is read only with %s, which is not set", fe.ref("Hints", "ResetHeader"))
	}
	if p.Hedge.Delay < 0 {
		fe.bad(fields("Hedge", "Delay"), "%v is negative", p.Hedge.Delay)
	}
	if p.Hedge.MaxHedges < 0 {
		fe.bad(fields("Hedge", "MaxHedges"), "%d is negative", p.Hedge.MaxHedges)
	}
	p.checkEndpoints(&fe)
	fe.errs = append(fe.errs, p.Hedge.check(under(path, "Hedge"))...)
	fe.errs = append(fe.errs, p.Breaker.check(under(path, "Breaker"))...)
	fe.errs = append(fe.errs, p.Overload.check(under(path, "Overload"))...)
	return fe.errs
}

// checkEndpoints reports the entries of p.Endpoints that are not a host
// name or IP address with an optional port, or repeat an earlier one.
func (p *Policy) checkEndpoints(fe *fieldErrors) {
	var seen map[hostPort]int
	for i, e := range p.Endpoints {
		field := fields("Endpoints", strconv.Itoa(i))
		switch {
		case e == "":
			fe.bad(field, "empty: want a host name, or host:port")
			continue
		case strings.Contains(e, "://"), strings.ContainsAny(e, "/?#@ \t"):
			fe.bad(field, "%q is not a host name, or host:port: no scheme, path, query or userinfo", e)
			continue
		}
		host, port, err := hostkey.Split(e)
		if err == nil && strings.HasPrefix(host, "*") {
			err = errors.New("a wildcard is not an endpoint")
		}
		if err != nil {
			fe.bad(field, "%q: %v", e, err)
			continue
		}
		k := hostPort{host, port}
		if j, ok := seen[k]; ok {
			fe.bad(field, "%q repeats entry %d", e, j)
			continue
		}
		if seen == nil {
			seen = make(map[hostPort]int)
		}
		seen[k] = i
	}
}

// checkEndpointsWithin reports the entries of p.Endpoints, a WithPolicy's,
// that declared, the endpoints the request's host key declares, does not
// hold: a per-request edit may keep, drop or reorder its host's endpoints,
// not add one, since its context may reach requests to other hosts (an
// SDK's token refresh under the caller's context).
func (p *Policy) checkEndpointsWithin(declared []string) []error {
	var errs []error
	for i, e := range p.Endpoints {
		host, port, err := hostkey.Split(e)
		if err != nil {
			continue // check reports it
		}
		if !slices.ContainsFunc(declared, func(d string) bool {
			dh, dp, err := hostkey.Split(d)
			return err == nil && dh == host && dp == port
		}) {
			errs = append(errs, invalidf([]string{"WithPolicy", "Endpoints", strconv.Itoa(i)},
				"%q is not among the endpoints the request's host key declares: a request can only keep, drop or reorder those", e))
		}
	}
	return errs
}

// checkMerged reports the combinations of fields that are invalid in the
// policy that applies, p, which has inherited what it left zero.
func (p *Policy) checkMerged(path []string) error {
	if p.AttemptHeader == "" {
		return nil
	}
	ah := http.CanonicalHeaderKey(p.AttemptHeader)
	kh := http.CanonicalHeaderKey(p.Keys.Header)
	if ah == kh || ah == "Idempotency-Key" || ah == "X-Idempotency-Key" {
		return invalidf(under(path, "AttemptHeader"), "%q would overwrite idempotency keys with attempt numbers", p.AttemptHeader)
	}
	return nil
}

// check reports the adaptive hedging settings that are invalid, or set
// without Adaptive, where they would be ignored.
func (h *HedgePolicy) check(path []string) []error {
	fe := fieldErrors{path: path}
	if q := h.Quantile; q != 0 && !(q > 0 && q < 1) {
		fe.bad(fields("Quantile"), "%v is not in (0, 1)", q)
	}
	if h.MinSamples < 0 {
		fe.bad(fields("MinSamples"), "%d is negative", h.MinSamples)
	}
	if h.MinDelay < 0 {
		fe.bad(fields("MinDelay"), "%v is negative", h.MinDelay)
	}
	if h.MaxDelay < 0 {
		fe.bad(fields("MaxDelay"), "%v is negative", h.MaxDelay)
	}
	if h.MinDelay > 0 && h.MaxDelay > 0 && h.MinDelay > h.MaxDelay {
		fe.bad(fields("MinDelay"), "%v is above %s (%v)", h.MinDelay, fe.ref("MaxDelay"), h.MaxDelay)
	}
	if !h.Adaptive && !h.Disabled && len(fe.errs) == 0 {
		for _, s := range []struct {
			name string
			set  bool
		}{{"Quantile", h.Quantile != 0}, {"MinSamples", h.MinSamples != 0}, {"MinDelay", h.MinDelay != 0}, {"MaxDelay", h.MaxDelay != 0}} {
			if s.set {
				fe.bad(fields(s.name), "is set without %s, which it needs", fe.ref("Adaptive"))
			}
		}
	}
	return fe.errs
}

// check reports nonsense breaker settings.
func (b *BreakerPolicy) check(path []string) []error {
	if b.Disabled || *b == (BreakerPolicy{}) {
		return nil
	}
	fe := fieldErrors{path: path}
	if b.ConsecutiveFailures < 0 {
		fe.bad(fields("ConsecutiveFailures"), "%d is negative", b.ConsecutiveFailures)
	}
	if !(b.FailureRatio >= 0 && b.FailureRatio <= 1) || math.IsNaN(b.FailureRatio) {
		fe.bad(fields("FailureRatio"), "%v is not in [0, 1]", b.FailureRatio)
	}
	if b.MinRequests < 0 {
		fe.bad(fields("MinRequests"), "%d is negative", b.MinRequests)
	}
	if b.Window < 0 {
		fe.bad(fields("Window"), "%v is negative", b.Window)
	} else if b.Window > maxBreakerDuration {
		fe.bad(fields("Window"), "%v is above %v", b.Window, maxBreakerDuration)
	}
	if b.OpenFor < 0 {
		fe.bad(fields("OpenFor"), "%v is negative", b.OpenFor)
	} else if b.OpenFor > maxBreakerDuration {
		fe.bad(fields("OpenFor"), "%v is above %v", b.OpenFor, maxBreakerDuration)
	}
	if b.HalfOpenAttempts < 0 {
		fe.bad(fields("HalfOpenAttempts"), "%d is negative", b.HalfOpenAttempts)
	}
	if b.ConsecutiveFailures == 0 && b.FailureRatio == 0 {
		fe.errs = append(fe.errs, invalidf(path, "no trip rule: set %s or %s (or %s)",
			fe.ref("ConsecutiveFailures"), fe.ref("FailureRatio"), fe.ref("Disabled")))
	}
	return fe.errs
}

// check reports nonsense overload settings, and tuning of a control that
// is off, which would otherwise be silently ignored.
func (o *OverloadPolicy) check(path []string) []error {
	if *o == (OverloadPolicy{}) {
		return nil
	}
	fe := fieldErrors{path: path}
	if k := o.ThrottleK; k != 0 && !(k >= 1 && !math.IsInf(k, 1)) {
		fe.bad(fields("ThrottleK"), "%v is not a finite number of at least 1", k)
	}
	if o.ThrottleWindow < 0 {
		fe.bad(fields("ThrottleWindow"), "%v is negative", o.ThrottleWindow)
	}
	if o.LimitMax < 0 {
		fe.bad(fields("LimitMax"), "%d is negative", o.LimitMax)
	}
	if o.LimitMin < 0 {
		fe.bad(fields("LimitMin"), "%d is negative", o.LimitMin)
	} else if m := cmp.Or(o.LimitMax, defaultLimitMax); o.LimitMin > m {
		fe.bad(fields("LimitMin"), "%d is above %s (%d)", o.LimitMin, fe.ref("LimitMax"), m)
	}
	q := o.Quota
	if q.Limit < 0 {
		fe.bad(fields("Quota", "Limit"), "%d is negative", q.Limit)
	}
	if q.Per < 0 {
		fe.bad(fields("Quota", "Per"), "%v is negative", q.Per)
	}
	if q.Burst < 0 {
		fe.bad(fields("Quota", "Burst"), "%d is negative", q.Burst)
	} else if q.Limit > 0 && q.Burst > q.Limit {
		fe.bad(fields("Quota", "Burst"), "%d is above %s (%d)", q.Burst, fe.ref("Quota", "Limit"), q.Limit)
	}
	if q.Limit == 0 && q != (Quota{}) {
		fe.bad(fields("Quota", "Limit"), "is 0: the quota declares nothing, but its other fields are set")
	}
	if r := q.rate(); q.Limit > 0 && q.Per >= 0 && (r > 1e9 || r < 1e-6) {
		fe.bad(fields("Quota"), "%d per %v is not a rate between one per million seconds and a billion a second", q.Limit, cmp.Or(q.Per, time.Second))
	}
	if strings.ContainsFunc(q.Key, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		fe.bad(fields("Quota", "Key"), "%q has control characters", q.Key)
	}
	if o.Disabled {
		return fe.errs
	}
	tuned := func(field string, set bool, control string, on bool) {
		if set && !on {
			fe.bad(fields(field), "is set but %s is off", fe.ref(control))
		}
	}
	tuned("ThrottleK", o.ThrottleK != 0, "Throttle", o.Throttle)
	tuned("ThrottleWindow", o.ThrottleWindow != 0, "Throttle", o.Throttle)
	tuned("LimitMax", o.LimitMax != 0, "Limit", o.Limit)
	tuned("LimitMin", o.LimitMin != 0, "Limit", o.Limit)
	tuned("LimitQueue", o.LimitQueue != 0, "Limit", o.Limit)
	tuned("PaceFailFast", o.PaceFailFast, "Pace", o.Pace || q.Limit > 0)
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

// policyPath is the path of Transport.Policy in errors.
func policyPath() []string { return []string{"Policy"} }

// entryPath is the path of a Hosts entry in errors.
func entryPath(key string) []string { return []string{"Hosts", key} }

// oneLine writes err, which may join several, on one line, each part
// without prefix: the path of the error it goes in already says it.
func oneLine(err error, prefix string) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = strings.TrimPrefix(e.Error(), prefix)
	}
	return strings.Join(parts, "; ")
}
