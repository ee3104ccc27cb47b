package httpretry

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// hostTable selects the policy for a request's host. Lookup order, most
// specific first: an exact "host:port" key; an exact "host" key; the
// "*.suffix" key with the longest suffix, a key with a port before one
// without; Transport.Policy.
type hostTable struct {
	exact    map[string]*policy // "host" and "host:port", lower-case, IPv6 without brackets for "host"
	wild     []wildcard         // longest suffix first
	fallback *policy
	err      error
}

type wildcard struct {
	suffix string // ".example.com"
	port   string // "" for any port
	p      *policy
}

func compileHosts(def Policy, hosts map[string]Policy) *hostTable {
	t := &hostTable{}
	var errs []error
	var err error
	if t.fallback, err = compilePolicy("", def); err != nil {
		errs = append(errs, err)
	}
	for _, key := range slices.Sorted(maps.Keys(hosts)) {
		p, err := compilePolicy(key, hosts[key])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := t.add(key, p); err != nil {
			errs = append(errs, err)
		}
	}
	slices.SortStableFunc(t.wild, func(a, b wildcard) int {
		if d := len(b.suffix) - len(a.suffix); d != 0 {
			return d
		}
		return len(b.port) - len(a.port)
	})
	t.err = errors.Join(errs...)
	return t
}

func (t *hostTable) add(key string, p *policy) error {
	host, port, err := splitPattern(key)
	if err != nil {
		return fmt.Errorf("%w: Hosts[%q]: %v", ErrInvalidPolicy, key, err)
	}
	if suffix, ok := strings.CutPrefix(host, "*"); ok {
		t.wild = append(t.wild, wildcard{suffix: suffix, port: port, p: p})
		return nil
	}
	if t.exact == nil {
		t.exact = make(map[string]*policy)
	}
	k := host
	if port != "" {
		k = net.JoinHostPort(host, port)
	}
	if _, dup := t.exact[k]; dup {
		return fmt.Errorf("%w: Hosts[%q]: same host as another key", ErrInvalidPolicy, key)
	}
	t.exact[k] = p
	return nil
}

// splitPattern validates a Hosts key and returns its lower-case host (with
// a leading "*" for a wildcard, IPv6 without brackets) and port.
func splitPattern(key string) (host, port string, err error) {
	if key == "" {
		return "", "", errors.New("empty host pattern")
	}
	if strings.ContainsAny(key, "/?#@ \t") {
		return "", "", errors.New(`a host pattern is "host", "host:port" or "*.suffix", not a URL`)
	}
	host = strings.ToLower(key)
	if strings.HasPrefix(host, "[") || strings.Count(host, ":") == 1 {
		h, p, err := net.SplitHostPort(host)
		if err != nil {
			return "", "", err
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
			return "", "", fmt.Errorf("bad port %q", p)
		}
		host, port = h, p
	}
	name := strings.TrimPrefix(host, "*.")
	switch {
	case host == "*":
		return "", "", errors.New(`"*" matches every host: set Transport.Policy instead`)
	case strings.Contains(name, "*"):
		return "", "", errors.New(`a wildcard must be a leading "*." followed by a domain`)
	case name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return "", "", fmt.Errorf("bad host name %q", name)
	}
	if strings.HasPrefix(host, "*.") {
		host = "*." + name
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == ':') {
			return "", "", fmt.Errorf("bad character %q in host name", r)
		}
	}
	return host, port, nil
}

// lookup returns the policy for u's host.
func (t *hostTable) lookup(u *url.URL) *policy {
	if len(t.exact) == 0 && len(t.wild) == 0 {
		return t.fallback
	}
	hostport := strings.ToLower(u.Host)
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		port = defaultPort(u.Scheme)
		hostport = net.JoinHostPort(host, port)
	}
	if len(t.exact) > 0 {
		if p, ok := t.exact[hostport]; ok {
			return p
		}
		if p, ok := t.exact[host]; ok {
			return p
		}
	}
	for _, w := range t.wild {
		if strings.HasSuffix(host, w.suffix) && (w.port == "" || w.port == port) {
			return w.p
		}
	}
	return t.fallback
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}
