package chaos

import (
	"net/http"
	"strings"

	"github.com/seedhq/httpretry/internal/hostkey"
)

// Rule selects requests and injects a fault into a share of them. Every
// selector left empty matches every request: the zero Rule selects all
// requests and, with Rate 0, fails none.
type Rule struct {
	// Name identifies the rule in OnInject and reports. It has no effect.
	Name string

	// Host, if set, selects requests to this host: "api.example.com"
	// (any port), "api.example.com:8443" (that port only) or
	// "*.example.com" (any subdomain, at any depth, any port; with a port,
	// "*.example.com:443", that port only). It is read as a key of
	// httpretry's Transport.Hosts is: case-insensitive, a trailing dot
	// dropped, a URL without a port matching a key with its scheme's
	// default port ("payments.internal:443" selects
	// https://payments.internal/), an IPv6 address in brackets when a port
	// follows ("[::1]:8080"). A Host that is not such a key (a URL, say)
	// selects nothing.
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

// matches reports whether the rule selects req; host is the rule's Host
// as hostkey.Split read it.
func (r *Rule) matches(req *http.Request, host *hostPattern) bool {
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
	if r.Host != "" && !host.matches(req) {
		return false
	}
	return r.If == nil || r.If(req)
}

// hostPattern is a Rule.Host, read once by the rule Transport.Hosts uses.
type hostPattern struct {
	host, port string
	bad        bool // not a host pattern: it selects nothing
}

func newHostPattern(s string) hostPattern {
	host, port, err := hostkey.Split(s)
	return hostPattern{host: host, port: port, bad: err != nil}
}

func (p *hostPattern) matches(req *http.Request) bool {
	if p.bad {
		return false
	}
	host, port := hostkey.Of(req.URL)
	return hostkey.Match(p.host, p.port, host, port)
}
