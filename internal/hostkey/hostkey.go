// Package hostkey is the one rule by which a host pattern ("host",
// "host:port", "*.suffix", "*.suffix:port") names the hosts of request
// URLs, so that httpretry's Transport.Hosts and chaos's Rule.Host mean the
// same by the same key: host names are case-insensitive, one trailing dot
// (a fully qualified name) is dropped, a URL without a port has its
// scheme's default port, and an IPv6 address is written in brackets when
// a port follows it.
package hostkey

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ErrStar is the error of the pattern "*", which would match every host.
var ErrStar = errors.New(`"*" matches every host`)

// ErrNotURL is the error of a pattern written as a URL, or with a query,
// fragment, userinfo or space in it.
var ErrNotURL = errors.New(`a key is "host", "host:port" or "*.suffix", optionally followed by a path prefix such as "/v1/search", not a URL`)

// Of returns u's host, normalised (Normal, IPv6 without brackets), and its
// port: the URL's own, or the scheme's default ("" for a scheme without
// one). It does not allocate unless the host has upper-case letters.
func Of(u *url.URL) (host, port string) {
	port = u.Port()
	if port == "" {
		port = DefaultPort(u.Scheme)
	}
	return Normal(u.Hostname()), port
}

// Normal is the one normalisation of a host name: lower case, and one
// trailing dot (a fully qualified name, which resolves the same) dropped.
func Normal(h string) string {
	if len(h) > 1 && h[len(h)-1] == '.' {
		h = h[:len(h)-1]
	}
	return strings.ToLower(h)
}

// DefaultPort returns the default port of scheme: "443" for https, "80"
// for http, "" for any other.
func DefaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// Split validates a host pattern and returns its host, normalised (with a
// leading "*." for a wildcard, IPv6 without brackets), and its port, ""
// for a pattern without one.
func Split(pattern string) (host, port string, err error) {
	if pattern == "" {
		return "", "", errors.New("empty host pattern")
	}
	if strings.ContainsAny(pattern, "?#@ \t") {
		return "", "", ErrNotURL
	}
	host = strings.ToLower(pattern)
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
	host = Normal(host)
	name := strings.TrimPrefix(host, "*.")
	switch {
	case host == "*":
		return "", "", ErrStar
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

// Match reports whether the pattern patHost, patPort (as Split returns
// them) names host and port (as Of returns them): the same host, or for
// "*.suffix" any subdomain of suffix at any depth but not suffix itself;
// and any port when patPort is "", else the same port.
func Match(patHost, patPort, host, port string) bool {
	if patPort != "" && patPort != port {
		return false
	}
	if suffix, ok := strings.CutPrefix(patHost, "*"); ok {
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return host == patHost
}
