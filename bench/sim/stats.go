package sim

import (
	"math"
	"slices"
)

// Summary describes a sample of a measurement over repeated runs.
type Summary struct {
	N    int     // runs
	Mean float64 // arithmetic mean
	SD   float64 // sample standard deviation (n − 1)
	Min  float64
	Max  float64
}

// Summarize returns the summary of xs.
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	s.Min, s.Max = xs[0], xs[0]
	for _, x := range xs {
		s.Mean += x
		s.Min = min(s.Min, x)
		s.Max = max(s.Max, x)
	}
	s.Mean /= float64(len(xs))
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(xs)-1))
	}
	return s
}

// SE is the standard error of the mean.
func (s Summary) SE() float64 {
	if s.N == 0 {
		return 0
	}
	return s.SD / math.Sqrt(float64(s.N))
}

// CI95 is the half-width of the normal-approximation 95 % confidence
// interval of the mean.
func (s Summary) CI95() float64 { return 1.96 * s.SE() }

// Median returns the median of xs without modifying it.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	c := slices.Clone(xs)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}
