// Package quantile is the evidence for the choice of httpretry's latency
// estimator (issue 14): candidate streaming quantile estimators fed the same
// synthetic latency streams, in the open (every sample seen exactly) and in
// a closed loop where each drives the hedging whose outcomes it then
// records. cmd/estimators prints the tables that docs/hedging.md quotes.
//
// The candidates are written here from their published descriptions, single
// threaded, to compare the algorithms; httpretry's own estimator is the
// concurrent implementation of the chosen one (latency.go in the root
// package), tested there on the same scenarios.
package quantile

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/influxdata/tdigest"
)

// An Estimator follows one quantile of a stream of latencies.
type Estimator interface {
	Record(d time.Duration)
	// Quantile returns the estimate of quantile q, the one the estimator
	// was built for (window-free estimators answer only that one).
	Quantile(q float64) (time.Duration, bool)
}

// Candidate names an estimator and builds it for quantile q.
type Candidate struct {
	Name string
	New  func(q float64) Estimator
}

// Candidates are the estimators compared.
func Candidates() []Candidate {
	return []Candidate{
		{"log histogram, 2 windows of 512 (chosen)", func(float64) Estimator { return newWindowHist(512) }},
		{"log histogram, exponential decay, half-life 512", func(float64) Estimator { return newDecayHist(512) }},
		{"t-digest (δ=100), 2 windows of 512", func(float64) Estimator { return newWindowDigest(512) }},
		{"P² (Jain & Chlamtac), no forgetting", func(q float64) Estimator { return newP2(q) }},
		{"moving quantile, failsafe-go age 30", func(q float64) Estimator { return newMoving(q, 30) }},
		{"moving quantile, failsafe-go age 300", func(q float64) Estimator { return newMoving(q, 300) }},
	}
}

// Log-linear buckets as in httpretry's estimator: 8 per power of two from
// 2^12 ns (4 µs) to 2^36 ns (69 s).
const (
	subBits  = 3
	minExp   = 12
	octaves  = 24
	nBuckets = octaves << subBits
)

func bucket(d time.Duration) int {
	v := uint64(max(d, 1<<minExp))
	e := bits.Len64(v) - 1
	if e >= minExp+octaves {
		return nBuckets - 1
	}
	return (e-minExp)<<subBits | int(v>>(e-subBits))&(1<<subBits-1)
}

func bounds(i int) (lo, width float64) {
	e := i>>subBits + minExp
	w := math.Ldexp(1, e-subBits)
	return float64(1<<subBits+i&(1<<subBits-1)) * w, w
}

// histQuantile interpolates quantile q within its bucket.
func histQuantile(counts []float64, total, q float64) time.Duration {
	rank, below := q*total, 0.0
	for i, c := range counts {
		if c > 0 && below+c >= rank {
			lo, w := bounds(i)
			return time.Duration(lo + w*(rank-below)/c)
		}
		below += c
	}
	lo, w := bounds(nBuckets - 1)
	return time.Duration(lo + w)
}

// windowHist keeps the samples of the window being filled and of the one
// before it.
type windowHist struct {
	size     int
	n        int
	cur, old [nBuckets]float64
	sum      [nBuckets]float64
}

func newWindowHist(size int) *windowHist { return &windowHist{size: size} }

func (h *windowHist) Record(d time.Duration) {
	if h.n > 0 && h.n%h.size == 0 {
		h.old, h.cur = h.cur, [nBuckets]float64{}
	}
	h.n++
	h.cur[bucket(d)]++
}

func (h *windowHist) Quantile(q float64) (time.Duration, bool) {
	total := 0.0
	for i := range h.sum {
		h.sum[i] = h.cur[i] + h.old[i]
		total += h.sum[i]
	}
	if total == 0 {
		return 0, false
	}
	return histQuantile(h.sum[:], total, q), true
}

// decayHist weighs each sample by 2^(n/halfLife) at the time it arrives
// (forward decay), so older samples count for exponentially less.
type decayHist struct {
	step, w, total float64
	counts         [nBuckets]float64
}

func newDecayHist(halfLife int) *decayHist {
	return &decayHist{step: math.Exp2(1 / float64(halfLife)), w: 1}
}

func (h *decayHist) Record(d time.Duration) {
	h.w *= h.step
	if h.w > 1e100 {
		for i := range h.counts {
			h.counts[i] /= h.w
		}
		h.total /= h.w
		h.w = 1
	}
	h.counts[bucket(d)] += h.w
	h.total += h.w
}

func (h *decayHist) Quantile(q float64) (time.Duration, bool) {
	if h.total == 0 {
		return 0, false
	}
	return histQuantile(h.counts[:], h.total, q), true
}

// windowDigest is a t-digest per window, merged to answer.
type windowDigest struct {
	size          int
	n             int
	cur, old, all *tdigest.TDigest
}

func newWindowDigest(size int) *windowDigest {
	return &windowDigest{size: size, cur: tdigest.New(), old: tdigest.New(), all: tdigest.New()}
}

func (t *windowDigest) Record(d time.Duration) {
	if t.n > 0 && t.n%t.size == 0 {
		t.old, t.cur = t.cur, t.old
		t.cur.Reset()
	}
	t.n++
	t.cur.Add(float64(d), 1)
}

func (t *windowDigest) Quantile(q float64) (time.Duration, bool) {
	if t.n == 0 {
		return 0, false
	}
	t.all.Reset()
	t.all.AddCentroidList(t.old.Centroids())
	t.all.AddCentroidList(t.cur.Centroids())
	return time.Duration(t.all.Quantile(q)), true
}

// p2 is the P² algorithm of Jain and Chlamtac (CACM 28(10), 1985): five
// markers whose heights follow the quantile, with no memory of the
// samples and no forgetting.
type p2 struct {
	q       float64
	n       int
	h       [5]float64 // marker heights
	pos     [5]float64 // actual positions
	want    [5]float64 // desired positions
	dn      [5]float64 // increments of the desired positions
	initial []float64
}

func newP2(q float64) *p2 {
	return &p2{q: q, dn: [5]float64{0, q / 2, q, (1 + q) / 2, 1}}
}

func (p *p2) Record(d time.Duration) {
	x := float64(d)
	p.n++
	if p.n <= 5 {
		p.initial = append(p.initial, x)
		if p.n == 5 {
			slices.Sort(p.initial)
			copy(p.h[:], p.initial)
			for i := range 5 {
				p.pos[i] = float64(i + 1)
			}
			p.want = [5]float64{1, 1 + 2*p.q, 1 + 4*p.q, 3 + 2*p.q, 5}
		}
		return
	}
	var k int
	switch {
	case x < p.h[0]:
		p.h[0], k = x, 0
	case x >= p.h[4]:
		p.h[4], k = x, 3
	default:
		for k = 0; k < 3 && x >= p.h[k+1]; k++ {
		}
	}
	for i := k + 1; i < 5; i++ {
		p.pos[i]++
	}
	for i := range 5 {
		p.want[i] += p.dn[i]
	}
	for i := 1; i <= 3; i++ {
		dd := p.want[i] - p.pos[i]
		if (dd >= 1 && p.pos[i+1]-p.pos[i] > 1) || (dd <= -1 && p.pos[i-1]-p.pos[i] < -1) {
			s := math.Copysign(1, dd)
			hp := p.h[i] + s/(p.pos[i+1]-p.pos[i-1])*((p.pos[i]-p.pos[i-1]+s)*(p.h[i+1]-p.h[i])/(p.pos[i+1]-p.pos[i])+
				(p.pos[i+1]-p.pos[i]-s)*(p.h[i]-p.h[i-1])/(p.pos[i]-p.pos[i-1]))
			if p.h[i-1] < hp && hp < p.h[i+1] {
				p.h[i] = hp
			} else {
				j := i + int(s)
				p.h[i] += s * (p.h[j] - p.h[i]) / (p.pos[j] - p.pos[i])
			}
			p.pos[i] += s
		}
	}
}

func (p *p2) Quantile(float64) (time.Duration, bool) {
	switch {
	case p.n == 0:
		return 0, false
	case p.n < 5:
		s := slices.Sorted(slices.Values(p.initial))
		return time.Duration(s[min(int(p.q*float64(len(s))), len(s)-1)]), true
	}
	return time.Duration(p.h[2]), true
}

// moving is Martin Jambon's windowless moving percentile
// (mjambon.com/2016-07-23-moving-percentile), with the parameters of
// failsafe-go v0.9.8's hedgepolicy.NewWithDelayQuantile: the estimate
// steps by δ = r·σ, σ from an exponential moving variance with
// α = 2/(age+1), r = 0.01; down by δ/q when a sample is below it, up by
// δ/(1−q) when above.
type moving struct {
	q, alpha                 float64
	n                        int
	value, mean, variance, r float64
}

func newMoving(q float64, age int) *moving {
	return &moving{q: q, alpha: 2 / (float64(age) + 1), r: 0.01}
}

func (m *moving) Record(d time.Duration) {
	x := float64(d)
	m.n++
	if m.n == 1 {
		m.value, m.mean = x, x
		return
	}
	old := m.mean
	m.mean += m.alpha * (x - m.mean)
	m.variance += m.alpha * ((x-old)*(x-m.mean) - m.variance)
	delta := math.Sqrt(m.variance) * m.r
	switch {
	case x < m.value:
		m.value -= delta / m.q
	case x > m.value:
		m.value += delta / (1 - m.q)
	}
}

func (m *moving) Quantile(float64) (time.Duration, bool) {
	return time.Duration(m.value), m.n > 0
}
