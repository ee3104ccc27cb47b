package otelhttpretry

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/seedhq/httpretry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
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

// keyed is a cache key that names a host.
type keyed[K any] interface {
	comparable
	hostKey() string
	withHost(string) K
}

func (k attemptKey) hostKey() string              { return k.host }
func (k attemptKey) withHost(h string) attemptKey { k.host = h; return k }
func (k callKey) hostKey() string                 { return k.host }
func (k callKey) withHost(h string) callKey       { k.host = h; return k }

// options returns the options of k from c, built by build on first use,
// and whether they are kept in c. A host past the bound is recorded under
// the one "_OTHER" host; past the cache's bound, options are built for
// each measurement and not kept.
func options[K keyed[K], V any](c *cache[K, V], hosts *hostSet, k K, build func(K, []attribute.KeyValue) V) (V, bool) {
	if v, ok := c.get(k); ok {
		return v, true
	}
	host, ok := hosts.get(k.hostKey())
	if !ok {
		k = k.withHost(overflowKey)
		if v, ok := c.get(k); ok {
			return v, true
		}
	}
	if v, ok := c.add(k, maxEntries, func() V { return build(k, host) }); ok {
		return v, true
	}
	return build(k, host), false
}

func (m *metrics) newAttemptOpts(k attemptKey, host []attribute.KeyValue) *attemptOpts {
	common := append(host[:len(host):len(host)], semconv.HTTPRequestMethodKey.String(k.method),
		AttemptKind.String(kindNames[k.kind]))
	if k.class != httpretry.ClassDefault {
		common = append(common, AttemptClass.String(k.class.String()))
	}
	o := &attemptOpts{}
	count := common
	if k.status != 0 {
		count = append(count, semconv.HTTPResponseStatusCode(k.status))
	}
	if k.lost {
		count = append(count, AttemptLost.Bool(true))
	} else {
		o.dur = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(common...))}
	}
	if k.source != httpretry.DelayNone {
		count = append(count, DelaySource.String(k.source.String()))
		delay := append(host[:len(host):len(host)], DelaySource.String(k.source.String()))
		o.delay = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(delay...))}
	}
	if k.stop != httpretry.StopNone {
		count = append(count, StopReason.String(k.stop.String()))
	}
	o.count.set = attribute.NewSet(count...)
	return o
}

func (m *metrics) newCallOpts(k callKey, host []attribute.KeyValue) *callOpts {
	attrs := append(host[:len(host):len(host)], semconv.HTTPRequestMethodKey.String(k.method),
		StopReason.String(k.stop.String()))
	if k.status != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(k.status))
	}
	o := &callOpts{dur: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}}
	// A call the budget stopped was refused a retry; one the breaker
	// stopped, its first attempt when it sent none, else a retry.
	r := refusalKey{host: k.host, kind: kindRetry}
	switch k.stop {
	case httpretry.StopBudget:
		r.reason = refusalReasons[k.stop]
	case httpretry.StopBreaker, httpretry.StopThrottled, httpretry.StopConcurrencyLimit, httpretry.StopRateLimited:
		r.reason = refusalReasons[k.stop]
		if !k.attempts {
			r.kind = kindFirst
		}
	default:
		return o
	}
	build := func() *counter {
		attrs := append(host[:len(host):len(host)], RefusalReason.String(r.reason), AttemptKind.String(kindNames[r.kind]))
		return &counter{set: attribute.NewSet(attrs...)}
	}
	var ok bool
	if o.refusal, ok = m.refusalOpts.add(r, maxEntries, build); !ok {
		o.refusal = &m.refusalOverflow
	}
	return o
}
