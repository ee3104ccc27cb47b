package otelhttpretry

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Bounds on what the metrics keep.
const (
	// maxHosts is how many hosts get attributes of their own; the others
	// share server.address "_OTHER". The OpenTelemetry SDK keeps at most
	// 2,000 series per instrument by default, and a host has a few to a
	// dozen (methods, statuses, classes).
	maxHosts = 100
	// maxEntries bounds each cache of attribute sets. Past it, options are
	// built for each measurement and not kept: correct, only slower.
	maxEntries = 4096
)

// overflowKey is the cache key of the hosts past maxHosts: no host key
// (lower-case "host:port") can be it.
const overflowKey = "\x00other"

// otherHost stands for the hosts past the bound.
var otherHost = []attribute.KeyValue{semconv.ServerAddress("_OTHER")}

// cache maps keys to values built once. Lookups are lock-free and do not
// allocate: the map is replaced whole, under a lock, when an entry is
// added, which happens once per key and at most maxEntries times.
type cache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

func (c *cache[K, V]) get(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// add returns the value of k, adding build's when k is missing and the
// cache holds fewer than limit entries. It reports false, and calls
// nothing, when the cache is full.
func (c *cache[K, V]) add(k K, limit int, build func() V) (V, bool) {
	if p := c.m.Load(); p != nil && len(*p) >= limit {
		v, ok := (*p)[k] // full: no lock for a key that cannot be added
		return v, ok
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if p := c.m.Load(); p != nil {
		old = *p
	}
	if v, ok := old[k]; ok {
		return v, true
	}
	if len(old) >= limit {
		var zero V
		return zero, false
	}
	next := make(map[K]V, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	v := build()
	next[k] = v
	c.m.Store(&next)
	return v, true
}

// hostSet gives the first maxHosts hosts their server.address and
// server.port attributes.
type hostSet struct {
	c cache[string, []attribute.KeyValue]
}

// get returns the attributes of host, a host key, and whether it has
// attributes of its own; a host past the bound gets otherHost's. The empty
// key (a request without a host) has none.
func (s *hostSet) get(host string) ([]attribute.KeyValue, bool) {
	if host == "" {
		return nil, true
	}
	if attrs, ok := s.c.get(host); ok {
		return attrs, true
	}
	if attrs, ok := s.c.add(host, maxHosts, func() []attribute.KeyValue { return hostAttrs(host) }); ok {
		return attrs, true
	}
	return otherHost, false
}

// hostAttrs returns server.address and server.port of a host key,
// "host:port". The port is left out when it is 80 or 443, the default of
// http and https, as the semantic conventions ask (server.port is required
// only when it is not the scheme's default): one attribute less on every
// measurement of the common case.
func hostAttrs(key string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(key)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(key)}
	}
	attrs := []attribute.KeyValue{semconv.ServerAddress(host)}
	if n, err := strconv.Atoi(port); err == nil && n != 80 && n != 443 {
		attrs = append(attrs, semconv.ServerPort(n))
	}
	return attrs
}
