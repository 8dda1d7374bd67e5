package outbox

import (
	"sync"
	"time"
)

// Defaults of SinkBreaker.
const (
	DefaultBreakerFailures  = 5
	DefaultMaxProbeInterval = 10 * time.Second
)

// SinkBreaker says when a worker holds off a sink that keeps failing, so
// that an outage of the destination costs neither the writers' requests
// (PublishNow does not wait for sink calls it expects to fail) nor a sink
// call, a counted attempt and a log line per record of the backlog or per
// write. The zero value means the defaults.
//
// The worker holds off the sink after Failures publishes in a row failed
// with errors not marked Permanent, on either path, or at once after an
// error marked Unavailable; any publish that goes through ends it.
// Meanwhile nothing calls the sink but one probe at a time, on one
// schedule that PublishNow and the rounds of Run share: the first
// PollInterval after the sink was held off, then at waits that double
// after each failed probe, up to MaxProbeInterval. So:
//
//   - PublishNow leaves its messages to the workers, due at once, without
//     calling the sink, unless a probe is due: then it publishes as
//     usual, and its first call is the probe (so that a process that only
//     publishes after commit finds out when the sink is back);
//   - Run claims nothing until a probe is due (wake-ups do not change
//     that), and then claims one record and publishes it as the probe: a
//     probe costs one failed attempt and one record's lease, not a batch
//     of them, and a message that fails for a reason of its own moves
//     back in due order while the next probe tries the next one, so
//     nothing stalls behind it;
//   - a round or an after-commit publish under way when the sink is held
//     off releases the records it has not called the sink for yet, due
//     at once.
//
// The first publish that goes through ends the hold-off, wakes Run, and
// full batches resume. ProcessBatch tries every record of its round. The
// worker logs when it starts holding off a sink (an error), once a minute
// while it does, and when the sink is back, and reports EventSinkDown and
// EventSinkUp.
type SinkBreaker struct {
	// Failures is how many publishes in a row must fail before the
	// worker holds off the sink. Values <= 0 mean DefaultBreakerFailures
	// (5).
	Failures int
	// MaxProbeInterval caps the wait between two probes.
	// Values <= 0 mean DefaultMaxProbeInterval (10s), or PollInterval if
	// that is longer; positive values below PollInterval are an error.
	MaxProbeInterval time.Duration
	// Off turns the breaker off: every due record is attempted, and
	// PublishNow calls the sink, whatever the sink did before.
	Off bool
}

func (b SinkBreaker) withDefaults(poll time.Duration) SinkBreaker {
	if b.Failures <= 0 {
		b.Failures = DefaultBreakerFailures
	}
	if b.MaxProbeInterval <= 0 {
		b.MaxProbeInterval = max(DefaultMaxProbeInterval, poll)
	}
	return b
}

// breakerReportEvery is how often a worker says the sink is still held
// off.
const breakerReportEvery = time.Minute

// breaker is a worker's view of its sink's health. It is safe for
// concurrent use: the worker's rounds and PublishNow callers share it.
type breaker struct {
	cfg  SinkBreaker
	poll time.Duration

	mu        sync.Mutex
	failures  int // in a row, while the sink is not held off
	down      bool
	since     time.Time     // when the sink was held off
	probeAt   time.Time     // when the next probe is due
	probeWait time.Duration // the wait before the next probe after a failed one
	probing   bool          // a caller holds the probe (see admit)
	probes    int           // failed probes since
	reported  time.Time     // the last report while held off
}

func newBreaker(cfg SinkBreaker, poll time.Duration) *breaker {
	return &breaker{cfg: cfg, poll: poll}
}

// heldOff reports whether the sink is held off now.
func (b *breaker) heldOff() bool {
	if b.cfg.Off {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down
}

// admission is what the breaker lets a caller do with the sink.
type admission int

const (
	// admitted: the sink is not held off; call it.
	admitted admission = iota
	// probe: the sink is held off, and the caller holds the probe: one
	// call may go to the sink. The caller ends it with endProbe.
	probe
	// refused: the sink is held off; call it not.
	refused
)

// admit says what a caller may do with the sink at now: call it while
// it is not held off, and otherwise make the probe, when one is due and
// no other caller holds it. A refused caller learns how long until the
// next probe is due (PollInterval, when one is in flight).
func (b *breaker) admit(now time.Time) (admission, time.Duration) {
	if b.cfg.Off {
		return admitted, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.down:
		return admitted, 0
	case b.probing:
		return refused, max(b.probeAt.Sub(now), b.poll)
	case now.Before(b.probeAt):
		return refused, b.probeAt.Sub(now)
	}
	b.probing = true
	b.probeAt = now.Add(b.probeWait) // if the probe makes no call, the next one waits as long
	return probe, 0
}

// endProbe ends the probe admit handed out, once its holder has made its
// call (or found nothing to call the sink for).
func (b *breaker) endProbe() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// breakerChange is what a publish's outcome did to the breaker, for the
// worker to log and report.
type breakerChange struct {
	opened, closed, still bool
	failures              int           // the failures in a row that opened it, or failed probes while it was held off
	downFor               time.Duration // for closed and still
	probeIn               time.Duration // for opened and still
}

// failed records a publish that failed with a retryable error at now;
// unavailable says the sink marked it Unavailable, probe that it was the
// probe of a held-off sink. While the sink is held off, only a failed
// probe counts: it doubles the wait before the next (a call that started
// before the sink was held off changes nothing).
func (b *breaker) failed(now time.Time, unavailable, probe bool) breakerChange {
	if b.cfg.Off {
		return breakerChange{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		if !probe {
			return breakerChange{}
		}
		b.probes++
		b.probeWait = min(2*b.probeWait, b.cfg.MaxProbeInterval)
		b.probeAt = now.Add(b.probeWait)
		if now.Sub(b.reported) < breakerReportEvery {
			return breakerChange{}
		}
		b.reported = now
		return breakerChange{still: true, failures: b.probes, downFor: now.Sub(b.since), probeIn: b.probeWait}
	}
	b.failures++
	if b.failures < b.cfg.Failures && !unavailable {
		return breakerChange{}
	}
	n := b.failures
	b.down, b.since, b.reported, b.failures, b.probes = true, now, now, 0, 0
	b.probeWait = min(b.poll, b.cfg.MaxProbeInterval)
	b.probeAt = now.Add(b.probeWait)
	return breakerChange{opened: true, failures: n, probeIn: b.probeWait}
}

// succeeded records a publish that went through at now.
func (b *breaker) succeeded(now time.Time) breakerChange {
	if b.cfg.Off {
		return breakerChange{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = 0
	if !b.down {
		return breakerChange{}
	}
	b.down = false
	return breakerChange{closed: true, failures: b.probes, downFor: now.Sub(b.since)}
}
