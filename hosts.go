package httpretry

import (
	"cmp"
	"errors"
	"maps"
	"net"
	"net/url"
	pathpkg "path"
	"slices"
	"strings"

	"github.com/seedhq/httpretry/internal/breaker"
	"github.com/seedhq/httpretry/internal/budget"
	"github.com/seedhq/httpretry/internal/hostkey"
	"github.com/seedhq/httpretry/internal/hoststate"
	"github.com/seedhq/httpretry/internal/limiter"
	"github.com/seedhq/httpretry/internal/throttle"
)

// hostPort is a host and port as the Transport keys them: lower-case,
// without the trailing dot of a fully qualified name, IPv6 without
// brackets, the scheme's default port filled in. Hosts lookups, Hosts keys
// and per-host state all use it, so that "pay.example.com." is the host
// "pay.example.com" everywhere.
type hostPort struct{ host, port string }

// hostOf returns u's hostPort (see package hostkey, the rule that chaos's
// Rule.Host shares). It does not allocate unless the host has upper-case
// letters.
func hostOf(u *url.URL) hostPort {
	host, port := hostkey.Of(u)
	return hostPort{host, port}
}

// normalPath is the one normalisation of a request path for matching
// Hosts keys: empty and "." segments dropped and ".." resolved, as a server
// resolves them, so that "/v1//admin" and "/v1/./admin" match the key
// "/v1/admin". A clean path, the common case, is returned as it is.
func normalPath(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p
	}
	c := pathpkg.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// String returns "host:port", or "host" for a scheme without a default
// port.
func (h hostPort) String() string {
	if h.port == "" {
		return h.host
	}
	return net.JoinHostPort(h.host, h.port)
}

// hostTable selects the policy for a request. A request's host picks a
// host pattern, most specific first: an exact "host:port"; an exact "host";
// the "*.suffix" with the longest suffix, one with a port before one
// without. The first pattern with a key that matches the request's path
// wins, and within it the longest path prefix. Transport.Policy applies
// when none does.
type hostTable struct {
	fallback *policy
	exact    map[hostPort]*pattern // port "" for a key without one
	wild     []*pattern            // most specific first
	err      error                 // every configuration error, joined
}

// pattern holds the keys of one host pattern.
type pattern struct {
	suffix   string  // ".example.com" for a wildcard
	port     string  // "" for any port
	hostOnly *policy // the key without a path, nil if none
	paths    []*path // longest prefix first
}

// path is a key with a path prefix. It inherits from the host's policy,
// which depends on the request's host and port, so it is compiled once for
// each policy that can be its parent.
type path struct {
	prefix string // "/v1/search": no trailing slash
	under  map[*policy]*policy
}

// matches reports whether the request path p is prefix or lies below it.
func (r *path) matches(p string) bool {
	return strings.HasPrefix(p, r.prefix) && (len(p) == len(r.prefix) || p[len(r.prefix)] == '/')
}

// compileHosts builds the table for Transport.Policy def and Hosts, and
// collects every error.
func compileHosts(def Policy, hosts map[string]Policy) *hostTable {
	t := &hostTable{}
	errs := def.check(policyPath())
	if err := def.checkMerged(policyPath()); err != nil {
		errs = append(errs, err)
	}
	if len(def.Endpoints) > 0 {
		errs = append(errs, errEndpointsScope(policyPath(), "this policy applies to every host without an entry of its own"))
	}
	t.fallback = compile(def)
	parents := []*policy{t.fallback}

	type pathKey struct {
		key string
		r   *path
		pol Policy
	}
	var pathKeys []pathKey
	for _, key := range slices.Sorted(maps.Keys(hosts)) {
		raw := hosts[key]
		where := entryPath(key)
		pat, prefix, err := t.patternOf(key)
		if err != nil {
			errs = append(errs, keyError(where, err))
			continue
		}
		fieldErrs := raw.check(where)
		if pat.suffix != "" && len(raw.Endpoints) > 0 {
			fieldErrs = append(fieldErrs, errEndpointsScope(where, "a wildcard key covers every host under it"))
		}
		if prefix != "" {
			for _, name := range raw.perHostSet() {
				fieldErrs = append(fieldErrs, invalidf(under(where, name), "is per host: set it on the key without the path"))
			}
		}
		errs = append(errs, fieldErrs...)
		if len(fieldErrs) > 0 {
			continue
		}
		if prefix != "" {
			r := &path{prefix: prefix}
			pat.paths = append(pat.paths, r)
			pathKeys = append(pathKeys, pathKey{key, r, raw})
			continue
		}
		merged := raw.inherit(def)
		if err := merged.checkMerged(where); err != nil && def.checkMerged(nil) == nil {
			errs = append(errs, err)
		}
		pat.hostOnly = compile(merged)
		parents = append(parents, pat.hostOnly)
	}
	for _, k := range pathKeys {
		k.r.under = make(map[*policy]*policy, len(parents))
		for _, parent := range parents {
			merged := k.pol.inherit(parent.src)
			if err := merged.checkMerged(entryPath(k.key)); err != nil && parent.src.checkMerged(nil) == nil {
				errs = append(errs, err)
			}
			k.r.under[parent] = compile(merged)
		}
	}
	for _, pat := range t.allPatterns() {
		slices.SortStableFunc(pat.paths, func(a, b *path) int { return len(b.prefix) - len(a.prefix) })
	}
	slices.SortStableFunc(t.wild, func(a, b *pattern) int {
		if d := len(b.suffix) - len(a.suffix); d != 0 {
			return d
		}
		return len(b.port) - len(a.port)
	})
	if len(errs) > 0 {
		t.err = joinUnique(errs)
	}
	return t
}

// errEndpointsScope is the error of Endpoints set at path, where they would
// move the requests of hosts that did not name them (why says which): a
// third party's request, its credentials and body, would go to the
// program's own endpoints.
func errEndpointsScope(path []string, why string) *PolicyError {
	return invalidf(under(path, "Endpoints"), "%s, third parties included, whose requests would move with their credentials: endpoints belong to the exact host key they fail over for, such as %q", why, "api.example.com")
}

// pattern returns the pattern for host and port, creating it.
func (t *hostTable) pattern(host, port string) *pattern {
	if suffix, ok := strings.CutPrefix(host, "*"); ok {
		for _, w := range t.wild {
			if w.suffix == suffix && w.port == port {
				return w
			}
		}
		w := &pattern{suffix: suffix, port: port}
		t.wild = append(t.wild, w)
		return w
	}
	if t.exact == nil {
		t.exact = make(map[hostPort]*pattern)
	}
	k := hostPort{host, port}
	if p, ok := t.exact[k]; ok {
		return p
	}
	p := &pattern{port: port}
	t.exact[k] = p
	return p
}

// patternOf parses a Hosts key and returns its pattern, created if new, and
// its path prefix. It reports a key that repeats another.
func (t *hostTable) patternOf(key string) (*pattern, string, error) {
	hostPart, prefix, err := splitKey(key)
	if err != nil {
		return nil, "", err
	}
	host, port, err := hostkey.Split(hostPart)
	if err != nil {
		return nil, "", err
	}
	pat := t.pattern(host, port)
	switch {
	case prefix == "" && pat.hostOnly != nil,
		prefix != "" && slices.ContainsFunc(pat.paths, func(r *path) bool { return r.prefix == prefix }):
		return nil, "", errors.New("same host and path as another key")
	}
	return pat, prefix, nil
}

func (t *hostTable) allPatterns() []*pattern {
	all := slices.Collect(maps.Values(t.exact))
	return append(all, t.wild...)
}

// keyError is the PolicyError of the Hosts key at path, which patternOf
// refused with err.
func keyError(path []string, err error) *PolicyError {
	if err == hostkey.ErrStar {
		return invalidf(path, "%v: set %s instead", err, settingRef(policyPath()))
	}
	return invalidf(path, "%v", err)
}

// splitKey splits a Hosts key into its host pattern and its path prefix
// ("" for none), checking the prefix.
func splitKey(key string) (host, prefix string, err error) {
	if strings.Contains(key, "://") {
		return "", "", hostkey.ErrNotURL
	}
	host, prefix, found := strings.Cut(key, "/")
	if !found {
		return host, "", nil
	}
	prefix = "/" + prefix
	switch {
	case strings.ContainsAny(prefix, "?#% \t"):
		return "", "", errors.New("a path prefix has no query, fragment, escapes or spaces")
	case strings.Contains(prefix, "//") || strings.Contains(prefix+"/", "/./") || strings.Contains(prefix+"/", "/../"):
		return "", "", errors.New("a path prefix must be clean: no empty, . or .. segments")
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return "", "", errors.New(`a path prefix of "/" matches every path: use the host alone`)
	}
	return host, prefix, nil
}

// lookup returns the policy for a request to h with URL path p. Its
// per-host settings are those of the host's key without a path.
func (t *hostTable) lookup(h hostPort, p string) *policy {
	if t.exact == nil && t.wild == nil {
		return t.fallback
	}
	p = normalPath(p)
	var sel *path
	// visit returns the policy once the pattern pat settles it.
	visit := func(pat *pattern) *policy {
		if sel == nil {
			if i := slices.IndexFunc(pat.paths, func(r *path) bool { return r.matches(p) }); i >= 0 {
				sel = pat.paths[i]
			} else if pat.hostOnly != nil {
				return pat.hostOnly
			}
		}
		if sel != nil && pat.hostOnly != nil {
			return sel.under[pat.hostOnly]
		}
		return nil
	}
	if t.exact != nil {
		if pat, ok := t.exact[h]; ok {
			if pol := visit(pat); pol != nil {
				return pol
			}
		}
		if pat, ok := t.exact[hostPort{h.host, ""}]; ok {
			if pol := visit(pat); pol != nil {
				return pol
			}
		}
	}
	for _, w := range t.wild {
		if strings.HasSuffix(h.host, w.suffix) && (w.port == "" || w.port == h.port) {
			if pol := visit(w); pol != nil {
				return pol
			}
		}
	}
	if sel != nil {
		return sel.under[t.fallback]
	}
	return t.fallback
}

// newState returns new state for host under p: its budget (NewBudget's;
// none for NoBudget or a nil one), its breaker and overload controls, and,
// when p hedges, its hedge budget, so that hedging keeps state even
// without a budget.
func (p *policy) newState(t *Transport, host string) *hoststate.State {
	s := &hoststate.State{Key: host}
	if p.newBudget == nil {
		s.Budget = defaultBudget()
	} else {
		switch b := p.newBudget(host); b.(type) {
		case nil:
		case unlimited:
			p.unbudgeted.Store(true) // NoBudget: the same for every host
		default:
			s.Budget = b
		}
	}
	if p.breaker != nil {
		s.Breaker = newBreaker(host, p.breaker)
	}
	if o := p.overload; o != nil {
		if o.Throttle {
			s.Throttle = throttle.New(throttle.Config{K: o.ThrottleK, Window: o.ThrottleWindow})
		}
		if o.Limit {
			s.Limiter = limiter.New(limiter.Config{Max: o.LimitMax, Min: o.LimitMin, Queue: o.LimitQueue})
		}
		if o.Pace || o.Quota.Limit > 0 {
			s.Pacer = t.pacerFor(&o.Quota)
		}
	}
	if p.hedge {
		s.HedgeBudget()
	}
	return s
}

// newBreaker returns the breaker of host under p, its defaults resolved.
func newBreaker(host string, p *BreakerPolicy) *breaker.Breaker {
	return breaker.New(host, breaker.Config{
		ConsecutiveFailures: p.ConsecutiveFailures,
		FailureRatio:        p.FailureRatio,
		MinRequests:         cmp.Or(p.MinRequests, defaultBreakerMinRequests),
		Window:              cmp.Or(p.Window, defaultBreakerWindow),
		OpenFor:             cmp.Or(p.OpenFor, defaultBreakerOpenFor),
		HalfOpenAttempts:    p.HalfOpenAttempts,
	})
}

// defaultBudget is the budget of a host whose policy leaves NewBudget nil:
// DefaultBudget's.
func defaultBudget() *budget.TokenBucket {
	b := new(budget.TokenBucket)
	b.Init(0, 0, 0, 0)
	return b
}

// endpointSpec is one entry of Policy.Endpoints, parsed.
type endpointSpec struct {
	host, port string // as hostPort's; port "" for the scheme's default
	addr       string // the URL host of its attempts: "host", "host:port", "[v6]:port"
	keyHTTPS   string // its "host:port" (Attempt.Host) for https, made once
	keyHTTP    string // ... for http
}

func newEndpointSpec(host, port string) endpointSpec {
	addr := host
	switch {
	case port != "":
		addr = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		addr = "[" + host + "]"
	}
	return endpointSpec{host, port, addr,
		hostPort{host, cmp.Or(port, "443")}.String(), hostPort{host, cmp.Or(port, "80")}.String()}
}

// key returns the spec's hostPort and its "host:port" under scheme.
func (spec *endpointSpec) key(scheme string) (hostPort, string) {
	h := hostPort{spec.host, cmp.Or(spec.port, hostkey.DefaultPort(scheme))}
	switch h.port {
	case "443":
		return h, spec.keyHTTPS
	case "80":
		return h, spec.keyHTTP
	}
	return h, h.String()
}

// endpoint is one host a call may send its attempts to: the request's own
// (the first), or one of Policy.Endpoints.
type endpoint struct {
	h      hostPort
	addr   string           // the URL host of its attempts; "" for the request's own
	host   string           // h as "host:port", as Attempt.Host
	p      *policy          // the policy its per-host state is made by
	state  *hoststate.State // nil until it needs state, as a call's host's
	failed bool             // an attempt sent to it failed in this call
}

// endpoints appends to eps the endpoints a call to own (as "host:port",
// host) under p, with URL scheme scheme, may send to: own first, then p's
// in order, each once.
func (t *hostTable) endpoints(eps []endpoint, own hostPort, host, scheme string, p *policy) []endpoint {
	eps = append(eps, endpoint{h: own, host: host, p: p})
	for i := range p.endpoints {
		spec := &p.endpoints[i]
		h, key := spec.key(scheme)
		if slices.ContainsFunc(eps, func(e endpoint) bool { return e.h == h }) {
			continue
		}
		ep := t.lookup(h, "/")
		if ep == t.fallback {
			ep = p // no entry of its own: the request's policy makes its state
		}
		eps = append(eps, endpoint{h: h, addr: spec.addr, host: key, p: ep})
	}
	return eps
}
