package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank quantile of sorted.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(float64(len(sorted))*q + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestHistogramQuantilesWithinBucketWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() time.Duration{
		"uniform 0-50ms": func() time.Duration { return time.Duration(rng.Int64N(int64(50 * time.Millisecond))) },
		"lognormal ~10ms": func() time.Duration {
			return time.Duration(float64(time.Millisecond) * 10 * rng.ExpFloat64() * rng.ExpFloat64())
		},
		"bimodal 3ms/10s": func() time.Duration {
			if rng.IntN(100) < 95 {
				return 3*time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
			}
			return 10*time.Second + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
		},
		"microseconds": func() time.Duration { return time.Duration(rng.Int64N(300)) * time.Microsecond },
	}
	for name, draw := range dists {
		t.Run(name, func(t *testing.T) {
			var h histogram
			vals := make([]time.Duration, 20000)
			for i := range vals {
				vals[i] = draw()
				h.add(vals[i])
			}
			slices.Sort(vals)
			for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				want, got := exactQuantile(vals, q), h.quantile(q)
				tolerance := want/128 + time.Microsecond
				if diff := got - want; diff > tolerance || diff < -tolerance {
					t.Errorf("q%v: got %v, exact %v (tolerance %v)", q, got, want, tolerance)
				}
			}
			if h.max != vals[len(vals)-1] {
				t.Errorf("max %v, want %v", h.max, vals[len(vals)-1])
			}
		})
	}
}

func TestHistogramEdges(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.figures().Count != 0 {
		t.Fatal("an empty histogram has no quantiles")
	}
	h.add(-time.Second) // a clock step: counted as zero
	h.add(7 * time.Millisecond)
	if got := h.quantile(0.5); got != 0 {
		t.Errorf("median of {0, 7ms} = %v, want 0", got)
	}
	if got := h.quantile(1); got != 7*time.Millisecond {
		t.Errorf("max of {0, 7ms} = %v, want 7ms", got)
	}
	var other histogram
	for range 3 {
		other.add(time.Hour)
	}
	h.merge(&other)
	if h.count() != 5 || h.max != time.Hour {
		t.Errorf("merged: count %d max %v, want 5 and 1h", h.count(), h.max)
	}
	if got := h.quantile(0.99); got < time.Hour*127/128 || got > time.Hour {
		t.Errorf("p99 after merge = %v, want about 1h", got)
	}
}

func TestBucketsAreContiguous(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<20; v++ {
		b := bucketOf(v)
		if b != prev && b != prev+1 {
			t.Fatalf("bucket of %d is %d after %d: buckets skip", v, b, prev)
		}
		if mid := bucketMid(b); mid < float64(v)-float64(v)/128-1 || mid > float64(v)+float64(v)/128+1 {
			t.Fatalf("bucket %d of %d has middle %v: too wide", b, v, mid)
		}
		prev = b
	}
}
