package outbox

import (
	"cmp"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
)

// RetryPolicy decides when a failed message is tried again.
//
// A policy is stateless: it decides from the number of failed attempts the
// store has recorded and from the error, so its schedule survives restarts
// and is the same on every instance. It must be safe for concurrent use.
type RetryPolicy interface {
	// NextRetry is called after the attempt-th failed attempt (1 for the
	// first failure) ended with err. It returns how long to wait before
	// the next attempt, or retry == false to give up, which moves the
	// record to StatusDead.
	NextRetry(attempt int, err error) (delay time.Duration, retry bool)
}

// FixedInterval retries every message Interval after each failure, forever,
// except a Permanent error, which goes to StatusDead at once. It is the
// default policy: an event is the outward face of a committed state
// change, so it is never given up because of a count; with this policy the
// only way to a dead letter is an error the sink marks as Permanent.
type FixedInterval struct {
	// Interval is the wait after each failure. Zero means the worker's
	// PollInterval (NewWorker fills it in); negative is an error.
	Interval time.Duration
}

// NextRetry returns Interval and true, or false for a Permanent error.
func (p FixedInterval) NextRetry(_ int, err error) (time.Duration, bool) {
	if IsPermanent(err) {
		return 0, false
	}
	return p.Interval, true
}

// Defaults of Exponential, and NoJitter.
const (
	DefaultExponentialInitial    = time.Second
	DefaultExponentialMax        = 5 * time.Minute
	DefaultExponentialMultiplier = 2.0
	DefaultExponentialJitter     = 0.2
	// NoJitter, as Exponential.Jitter, turns jitter off.
	NoJitter = -1
)

// Exponential waits Initial after the first failure and Multiplier times
// longer after each further one, never longer than Max, with random
// jitter of ±Jitter (a fraction) around each wait, and never retries a
// Permanent error. The schedule is cenkalti/backoff/v4's exponential
// backoff, computed afresh from the attempt count each time, so the policy
// holds no state. The zero value means all defaults.
type Exponential struct {
	// Initial is the first wait. Defaults to DefaultExponentialInitial (1s).
	Initial time.Duration
	// Max caps every wait, jitter included. Defaults to
	// DefaultExponentialMax (5m).
	Max time.Duration
	// Multiplier grows the wait per attempt. Defaults to
	// DefaultExponentialMultiplier (2); must be at least 1.
	Multiplier float64
	// Jitter spreads each wait uniformly over ±Jitter of it, so that
	// records failed together are not retried together. 0 to 1; defaults
	// to DefaultExponentialJitter (0.2). Use NoJitter for none.
	Jitter float64
	// Rand returns a uniform number in [0, 1). Defaults to math/rand/v2;
	// tests inject their own.
	Rand func() float64
}

// NextRetry returns the wait after the attempt-th failure.
func (p Exponential) NextRetry(attempt int, err error) (time.Duration, bool) {
	if IsPermanent(err) {
		return 0, false
	}
	p = p.withDefaults()
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.Initial),
		backoff.WithMaxInterval(p.Max),
		backoff.WithMultiplier(p.Multiplier),
		backoff.WithRandomizationFactor(0), // jitter is applied below, from p.Rand
		backoff.WithMaxElapsedTime(0),
	)
	// Replay the schedule up to this attempt; it stops growing at Max,
	// so the loop is short however large the attempt count is.
	delay := b.NextBackOff()
	for i := 1; i < attempt && delay < p.Max; i++ {
		delay = b.NextBackOff()
	}
	if p.Jitter > 0 {
		delay = time.Duration(float64(delay) * (1 + p.Jitter*(2*p.Rand()-1)))
	}
	return min(max(delay, 0), p.Max), true
}

func (p Exponential) withDefaults() Exponential {
	p.Initial = optcheck.Positive(p.Initial, DefaultExponentialInitial)
	p.Max = optcheck.Positive(p.Max, DefaultExponentialMax)
	p.Multiplier = cmp.Or(p.Multiplier, DefaultExponentialMultiplier)
	p.Jitter = cmp.Or(p.Jitter, DefaultExponentialJitter)
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

func (p Exponential) validate() error {
	p = p.withDefaults()
	var problems optcheck.Problems
	if p.Multiplier < 1 {
		problems.Addf("multiplier %v: must be at least 1", p.Multiplier)
	}
	if p.Jitter > 1 || (p.Jitter < 0 && p.Jitter != NoJitter) {
		problems.Addf("jitter %v: must be 0 to 1", p.Jitter)
	}
	if p.Max < p.Initial {
		problems.Addf("max interval %v: must be at least the initial interval %v", p.Max, p.Initial)
	}
	return problems.Err()
}

// MaxAttempts wraps a policy and gives up after Attempts failed attempts:
// the record goes to StatusDead, with its last error.
type MaxAttempts struct {
	// Policy schedules the attempts before the last. Required.
	Policy RetryPolicy
	// Attempts is the most failed attempts; at least 1.
	Attempts int
}

// NextRetry gives up at Attempts failures, and otherwise asks Policy.
func (m MaxAttempts) NextRetry(attempt int, err error) (time.Duration, bool) {
	if attempt >= m.Attempts {
		return 0, false
	}
	return m.Policy.NextRetry(attempt, err)
}
