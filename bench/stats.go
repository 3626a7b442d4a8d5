package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a sample of durations.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarise returns the percentiles of d (nearest rank) in milliseconds.
func Summarise(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Latency{
		N:    len(s),
		P50:  ms(rank(s, 0.50)),
		P90:  ms(rank(s, 0.90)),
		P99:  ms(rank(s, 0.99)),
		Mean: ms(sum / time.Duration(len(s))),
		Max:  ms(s[len(s)-1]),
	}
}

// rank is the nearest-rank percentile of a sorted sample.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

// Ratio is a/b rounded to 2 decimals, 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 2)
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}
