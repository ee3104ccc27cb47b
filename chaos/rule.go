package chaos

import (
	"net/http"
	"strings"
)

// Rule selects requests and injects a fault into a share of them. Every
// selector left empty matches every request: the zero Rule selects all
// requests and, with Rate 0, fails none.
type Rule struct {
	// Name identifies the rule in OnInject and reports. It has no effect.
	Name string

	// Host, if set, selects requests to this host: "api.example.com"
	// (any port), "api.example.com:8443" (that port only) or
	// "*.example.com" (any subdomain, at any depth, any port).
	// Case-insensitive.
	Host string

	// Method, if set, selects requests with this method ("" is GET).
	Method string

	// PathPrefix, if set, selects requests whose URL path starts with it.
	PathPrefix string

	// If, if non-nil, is consulted for each request the other selectors
	// let through, before the draw: the rule applies only when it reports
	// true. It can read a feature flag, a header, a deadline. It runs on
	// the request's goroutine and must be safe for concurrent use.
	If func(*http.Request) bool

	// Rate is the share of selected requests the fault strikes, from 0
	// (none) to 1 (all). Values below 0, and NaN, mean 0; above 1, 1.
	Rate float64

	// Fault handles the requests the draw strikes. Nil disables the rule.
	Fault Fault
}

// matches reports whether the rule selects req.
func (r *Rule) matches(req *http.Request) bool {
	if r.Method != "" {
		m := req.Method
		if m == "" {
			m = http.MethodGet
		}
		if m != r.Method {
			return false
		}
	}
	if r.PathPrefix != "" && !strings.HasPrefix(req.URL.Path, r.PathPrefix) {
		return false
	}
	if r.Host != "" && !hostMatches(r.Host, req) {
		return false
	}
	return r.If == nil || r.If(req)
}

func hostMatches(pattern string, req *http.Request) bool {
	name := req.URL.Hostname()
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return len(name) > len(suffix)+1 && name[len(name)-len(suffix)-1] == '.' &&
			strings.EqualFold(name[len(name)-len(suffix):], suffix)
	}
	return strings.EqualFold(pattern, name) || strings.EqualFold(pattern, req.URL.Host)
}
