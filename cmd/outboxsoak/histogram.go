package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts durations in buckets whose width is at most 1/128 of
// their lower bound (exact below 128 µs), so that the percentiles of
// millions of lags cost a few KiB and are within 0.8% of the exact
// nearest-rank value. The zero value is an empty histogram. It is not
// safe for concurrent use.
type histogram struct {
	counts []uint64
	n      uint64
	max    time.Duration
}

// subBuckets is the number of buckets per power of two.
const subBuckets = 128

// subBits is log2(subBuckets).
const subBits = 7

// bucketOf returns the bucket of v microseconds (v >= 0).
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	return subBuckets*shift + int(v>>shift)
}

// bucketMid returns the middle of bucket i, in microseconds.
func bucketMid(i int) float64 {
	if i < 2*subBuckets {
		return float64(i)
	}
	shift := i/subBuckets - 1
	m := uint64(i - subBuckets*shift)
	lo := m << shift
	hi := (m+1)<<shift - 1
	return (float64(lo) + float64(hi)) / 2
}

// add counts one duration; negative ones count as zero.
func (h *histogram) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	i := bucketOf(uint64(d / time.Microsecond))
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// merge adds every count of o.
func (h *histogram) merge(o *histogram) {
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// count returns the number of durations counted.
func (h *histogram) count() uint64 { return h.n }

// quantile returns the nearest-rank q-quantile (0 < q <= 1): the
// smallest counted duration that at least q of all are at most, to
// within its bucket's width, never above the largest counted, and the
// largest itself for q = 1. It
// returns 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			d := time.Duration(bucketMid(i) * float64(time.Microsecond))
			return min(d, h.max)
		}
	}
	return h.max
}

// lagFigures are a histogram's figures in milliseconds, for reports.
type lagFigures struct {
	Count uint64  `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// figures returns h's count, median, 99th percentile and maximum.
func (h *histogram) figures() lagFigures {
	return lagFigures{Count: h.n, P50Ms: ms(h.quantile(0.50)), P99Ms: ms(h.quantile(0.99)), MaxMs: ms(h.max)}
}

// ms returns d in milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}
