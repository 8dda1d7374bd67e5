package outbox

import (
	"errors"
	"testing"
	"time"
)

// FuzzRetryConfig: any configuration either is rejected with an error or
// gives a policy whose delays are never negative and never beyond its cap.
func FuzzRetryConfig(f *testing.F) {
	f.Add("", int64(0), int64(0), int64(0), 0.0, 0.0, 0, 1)
	f.Add("fixed_interval", int64(time.Second), int64(0), int64(0), 0.0, 0.0, 3, 2)
	f.Add("exponential", int64(0), int64(time.Second), int64(time.Minute), 2.0, 0.2, 0, 40)
	f.Add("exponential", int64(0), int64(time.Hour), int64(time.Second), 0.5, 3.0, -1, 0)
	f.Add("Exponential ", int64(-1), int64(-1), int64(-1), -2.0, -1.0, 1<<30, 1<<30)
	f.Fuzz(func(t *testing.T, word string, interval, initial, maxInterval int64, mult, jitter float64, maxAttempts, attempt int) {
		c := RetryConfig{
			Strategy: word, Interval: time.Duration(interval), InitialInterval: time.Duration(initial),
			MaxInterval: time.Duration(maxInterval), Multiplier: mult, Jitter: jitter, MaxAttempts: maxAttempts,
		}
		p, err := c.Policy()
		if err != nil {
			return
		}
		if err := validatePolicy(withPollInterval(p, time.Second)); err != nil {
			t.Fatalf("Policy accepted %+v but the worker would reject it: %v", c, err)
		}
		attempt = max(attempt, 1)
		d, retry := p.NextRetry(attempt, errors.New("x"))
		if !retry {
			return
		}
		if d < 0 {
			t.Fatalf("negative delay %v for %+v attempt %d", d, c, attempt)
		}
		if e, ok := p.(Exponential); ok && d > e.withDefaults().Max {
			t.Fatalf("delay %v beyond the cap for %+v", d, c)
		}
	})
}
