package webhook

import (
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// RespectRetryAfter is a retry policy that waits at least what the
// endpoint asked for: the wait of Policy, or Error.RetryAfter (an
// endpoint's Retry-After on 429, 503 or any other answer, capped by
// Config.MaxRetryAfter) when that is longer. What Policy gives up on
// stays given up. Use it as WorkerOptions.Retry:
//
//	outbox.WorkerOptions{Retry: webhook.RespectRetryAfter{Policy: outbox.Exponential{}}}
//
// Like every policy it is stateless, and safe for concurrent use.
type RespectRetryAfter struct {
	// Policy schedules the retries. nil means
	// outbox.FixedInterval{Interval: outbox.DefaultPollInterval}. A
	// FixedInterval without an Interval waits 0 here (the worker fills
	// in its PollInterval only for a policy it is given directly): give
	// it one.
	Policy outbox.RetryPolicy
}

// NextRetry returns Policy's decision, with the wait raised to the
// endpoint's Retry-After.
func (p RespectRetryAfter) NextRetry(attempt int, err error) (time.Duration, bool) {
	policy := p.Policy
	if policy == nil {
		policy = outbox.FixedInterval{Interval: outbox.DefaultPollInterval}
	}
	delay, retry := policy.NextRetry(attempt, err)
	if !retry {
		return 0, false
	}
	if after, ok := RetryAfter(err); ok && after > delay {
		delay = after
	}
	return delay, true
}
