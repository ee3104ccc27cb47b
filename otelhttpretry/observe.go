package otelhttpretry

import (
	"context"
	"math"
	"weak"

	"github.com/seedhq/httpretry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// register registers the callback that observes the counters, and the
// gauges from the Stats of the Transport t points to while it lives.
func (m *metrics) register(t weak.Pointer[httpretry.Transport]) (metric.Registration, error) {
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observeCounts(o, m.attempts, &m.attemptOpts, func(a *attemptOpts) *counter { return &a.count }, &m.attemptOverflow)
		observeCounts(o, m.refusals, &m.refusalOpts, func(c *counter) *counter { return c }, &m.refusalOverflow)
		if tr := t.Value(); tr != nil {
			stats, _ := tr.StatsPage(httpretry.StatsQuery{Limit: observedHosts})
			m.observe(o, stats)
		}
		return nil
	}, m.attempts, m.refusals, m.budgetLevel, m.breakerState, m.throttle, m.concurrency)
}

// observeCounts reports every counter of c, and the overflow's once it
// has counted anything.
func observeCounts[K comparable, V any](o metric.Observer, inst metric.Int64Observable, c *cache[K, V], count func(V) *counter, overflow *counter) {
	if p := c.m.Load(); p != nil {
		for _, v := range *p {
			ct := count(v)
			o.ObserveInt64(inst, ct.n.Load(), metric.WithAttributeSet(ct.set))
		}
	}
	if n := overflow.n.Load(); n > 0 {
		o.ObserveInt64(inst, n, metric.WithAttributeSet(overflow.set))
	}
}

// observedHosts is how many hosts a collection reads the gauges of: the
// most in trouble (Transport.StatsPage), so that a collection costs the
// same at 10,000 hosts as at 200, and twice maxHosts, so that the hosts
// past the bound still have their worst reported under "_OTHER".
const observedHosts = 2 * maxHosts

// observe reports each host's budget level, breaker state, throttling
// probability and concurrency limit. Hosts past the bound are reported
// together as "_OTHER", with the worst of each among them.
func (m *metrics) observe(o metric.Observer, stats []httpretry.HostStats) {
	var other struct {
		level, state, throttle                    float64
		limit                                     int
		hasLevel, hasState, hasThrottle, hasLimit bool
	}
	other.level = 1
	for _, s := range stats {
		host, known := m.hosts.get(s.Host)
		set := metric.WithAttributeSet(attribute.NewSet(host...))
		if level, ok := budgetLevel(s.Budget); ok {
			if known {
				o.ObserveFloat64(m.budgetLevel, level, set)
			} else {
				other.level, other.hasLevel = min(other.level, level), true
			}
		}
		if b := s.Breaker; b != nil {
			if known {
				o.ObserveInt64(m.breakerState, int64(b.State), set)
			} else {
				other.state, other.hasState = max(other.state, float64(b.State)), true
			}
		}
		if th := s.Throttle; th != nil && finite(th.Probability) {
			if known {
				o.ObserveFloat64(m.throttle, th.Probability, set)
			} else {
				other.throttle, other.hasThrottle = max(other.throttle, th.Probability), true
			}
		}
		if l := s.Limit; l != nil {
			if known {
				o.ObserveInt64(m.concurrency, int64(l.Limit), set)
			} else if !other.hasLimit || l.Limit < other.limit {
				other.limit, other.hasLimit = l.Limit, true
			}
		}
	}
	set := metric.WithAttributeSet(attribute.NewSet(otherHost...))
	if other.hasLevel {
		o.ObserveFloat64(m.budgetLevel, other.level, set)
	}
	if other.hasState {
		o.ObserveInt64(m.breakerState, int64(other.state), set)
	}
	if other.hasThrottle {
		o.ObserveFloat64(m.throttle, other.throttle, set)
	}
	if other.hasLimit {
		o.ObserveInt64(m.concurrency, int64(other.limit), set)
	}
}

// budgetLevel returns the share of b available, from 0 to 1, and whether
// there is one to observe: b reports a level, with Available and Capacity
// finite and Capacity above 0. A Budget of the user's may report +Inf
// ("unlimited") or NaN; such a level is skipped, not clamped, so that the
// gauge never says 0 (empty) or 1 (full) of a budget that said neither.
func budgetLevel(b *httpretry.BudgetStats) (float64, bool) {
	if b == nil || b.Capacity <= 0 || !finite(b.Available) || !finite(b.Capacity) {
		return 0, false
	}
	return min(max(b.Available/b.Capacity, 0), 1), true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
