package outbox

import (
	"fmt"
	"time"
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

// FixedInterval retries every message forever, Interval after each failure.
// It is the default policy and the seed's V1 behaviour: a room event is
// the outward face of a committed state change, so it is never dropped
// because of a count.
type FixedInterval struct {
	// Interval is the wait after each failure. Zero means the worker's
	// PollInterval (NewWorker fills it in); negative is an error.
	Interval time.Duration
}

// NextRetry returns Interval and true, whatever the attempt and error.
func (p FixedInterval) NextRetry(int, error) (time.Duration, bool) {
	return p.Interval, true
}

// Retry strategy words, as used in configuration files (the seed's
// outbox_worker.retry_strategy).
const (
	RetryStrategyFixedInterval = "fixed_interval"
)

// ParseRetryStrategy turns a configuration word into a RetryPolicy. The
// empty word and "fixed_interval" give FixedInterval (its interval is the
// worker's PollInterval); any other word is an error naming it, so that a
// typo fails start-up instead of silently changing delivery semantics.
func ParseRetryStrategy(word string) (RetryPolicy, error) {
	switch word {
	case "", RetryStrategyFixedInterval:
		return FixedInterval{}, nil
	}
	return nil, fmt.Errorf("outbox: retry strategy %q: unknown (supported: %q)", word, RetryStrategyFixedInterval)
}
