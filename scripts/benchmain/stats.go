package main

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// sample is a set of durations.
type sample []time.Duration

func (s sample) sorted() sample {
	c := append(sample(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c
}

// quantile is the nearest-rank quantile, the ceil(q*n)-th smallest value:
// with fewer than 100 values, p99 is the largest.
func (s sample) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.sorted()
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[max(0, min(i, len(c)-1))]
}

// median is the middle value, or the mean of the two middle ones.
func (s sample) median() time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.sorted()
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func (s sample) max() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s.sorted()[len(s)-1]
}

func (s sample) min() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s.sorted()[0]
}

func (s sample) mean() time.Duration {
	if len(s) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range s {
		t += d
	}
	return t / time.Duration(len(s))
}

// ms formats a duration in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / 1e6
	switch {
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func msf(seconds float64) string {
	if math.IsNaN(seconds) {
		return "n/a"
	}
	return ms(time.Duration(seconds * 1e9))
}

// ratio formats a/b.
func ratio(a, b time.Duration) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

func ratioF(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// medianF is the median of float values.
func medianF(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func minMaxF(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
