package outbox

import (
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var errTransient = errors.New("im busy")

func TestFixedIntervalRetriesForeverButNotPermanentErrors(t *testing.T) {
	p := FixedInterval{Interval: 3 * time.Second}
	for _, attempt := range []int{1, 2, 100, 1 << 30} {
		d, retry := p.NextRetry(attempt, errTransient)
		require.True(t, retry, "attempt %d", attempt)
		require.Equal(t, 3*time.Second, d)
	}
	_, retry := p.NextRetry(1, Permanent(io.EOF))
	require.False(t, retry, "a permanent error is the only way to a dead letter")
}

// fixedRand returns the given values in turn, as an injected source.
func fixedRand(vals ...float64) func() float64 {
	i := 0
	return func() float64 {
		v := vals[i%len(vals)]
		i++
		return v
	}
}

func TestExponentialSchedule(t *testing.T) {
	p := Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: NoJitter}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i, w := range want {
		d, retry := p.NextRetry(i+1, errTransient)
		require.True(t, retry)
		require.Equal(t, w*time.Second, d, "attempt %d", i+1)
	}
	d, _ := p.NextRetry(math.MaxInt32, errTransient)
	require.Equal(t, time.Minute, d, "capped however many attempts, and computed without a long loop")

	_, retry := p.NextRetry(1, Permanent(io.EOF))
	require.False(t, retry)

	def := Exponential{Rand: fixedRand(0.5)} // 0.5: jitter of exactly zero
	d, _ = def.NextRetry(1, errTransient)
	require.Equal(t, DefaultExponentialInitial, d)
	d, _ = def.NextRetry(3, errTransient)
	require.Equal(t, 4*DefaultExponentialInitial, d)
}

func TestExponentialJitterBoundsAndCap(t *testing.T) {
	p := Exponential{Initial: 10 * time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.25}
	low, _ := Exponential{Initial: p.Initial, Max: p.Max, Multiplier: 2, Jitter: 0.25, Rand: fixedRand(0)}.NextRetry(1, errTransient)
	high, _ := Exponential{Initial: p.Initial, Max: p.Max, Multiplier: 2, Jitter: 0.25, Rand: fixedRand(0.999999)}.NextRetry(1, errTransient)
	require.Equal(t, 7500*time.Millisecond, low, "-25%")
	require.InDelta(t, float64(12500*time.Millisecond), float64(high), float64(time.Millisecond), "+25%")

	// Over many draws, every delay stays in its band.
	p.Rand = fixedRand(0, 0.1, 0.37, 0.5, 0.73, 0.9, 0.999)
	for attempt := 1; attempt <= 12; attempt++ {
		base := min(10*time.Second<<(attempt-1), time.Hour)
		for range 7 {
			d, _ := p.NextRetry(attempt, errTransient)
			require.GreaterOrEqual(t, d, time.Duration(float64(base)*0.75), "attempt %d", attempt)
			require.LessOrEqual(t, d, min(time.Duration(float64(base)*1.25), time.Hour), "attempt %d: jitter never passes the cap", attempt)
		}
	}
}

func TestMaxAttempts(t *testing.T) {
	p := MaxAttempts{Policy: FixedInterval{Interval: time.Second}, Attempts: 3}
	for attempt := 1; attempt < 3; attempt++ {
		d, retry := p.NextRetry(attempt, errTransient)
		require.True(t, retry)
		require.Equal(t, time.Second, d)
	}
	_, retry := p.NextRetry(3, errTransient)
	require.False(t, retry, "the third failure is the last")
	_, retry = p.NextRetry(1, Permanent(io.EOF))
	require.False(t, retry, "the wrapped policy still stops on permanent errors")
}
