package outbox

import (
	"context"
	"time"
)

// Observer receives what a worker does, for metrics (outbox/outboxprom
// implements it with Prometheus). Observe is called on the goroutine that
// did the work, including callers of PublishNow: it must be quick and
// safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// EventKind says what an Event is about.
type EventKind int

// The events a worker reports.
const (
	// EventPublished: the sink accepted Record (Latency: the call).
	EventPublished EventKind = iota + 1
	// EventPublishFailed: the sink failed for Record (Err, Latency).
	EventPublishFailed
	// EventDead: Record became a dead letter (Err: what ended it).
	EventDead
	// EventClaimFailed: a claim failed (Err); the round ended. A claim
	// cut short because the context of Run (or of the caller) ended is
	// not reported: it is a stop, not a failure of the store.
	EventClaimFailed
	// EventSettleFailed: outcomes could not be recorded (Err); their
	// records are delivered again after the lease expires.
	EventSettleFailed
	// EventPurged: retention deleted Count published records.
	EventPurged
	// EventLeaseLost: Count outcomes were not recorded because their
	// lease had expired; another worker may hold those records, and they
	// are delivered again.
	EventLeaseLost
	// EventSinkDown: the worker holds off its sink (see SinkBreaker)
	// after Count failed publishes in a row, or one the sink marked
	// Unavailable (Err: the last failure).
	EventSinkDown
	// EventSinkUp: the sink the worker held off took a message again
	// (Latency: how long it was held off; Count: the failed probes
	// meanwhile).
	EventSinkUp
)

func (k EventKind) String() string {
	switch k {
	case EventPublished:
		return "published"
	case EventPublishFailed:
		return "publish_failed"
	case EventDead:
		return "dead"
	case EventClaimFailed:
		return "claim_failed"
	case EventSettleFailed:
		return "settle_failed"
	case EventPurged:
		return "purged"
	case EventLeaseLost:
		return "lease_lost"
	case EventSinkDown:
		return "sink_down"
	case EventSinkUp:
		return "sink_up"
	}
	return "unknown"
}

// Event is one thing a worker did.
type Event struct {
	Kind EventKind
	// Worker is WorkerOptions.Name.
	Worker string
	// Path is PathWorker for the background rounds and PathAfterCommit
	// for PublishNow.
	Path Path
	// Record is the record concerned, for publish and dead events.
	Record Record
	// Latency is how long the sink call took, for publish events, and how
	// long the sink was held off, for EventSinkUp.
	Latency time.Duration
	// Err is the failure, for failure and dead events.
	Err error
	// Count is how many records, for EventPurged and EventLeaseLost, and
	// how many failed publishes, for EventSinkDown and EventSinkUp.
	Count int
}

// Path tells the two ways a record is delivered apart, in events and
// logs.
type Path string

const (
	// PathWorker: a round of the background worker (Run, ProcessBatch).
	// A failure is an attempt, counted and scheduled by the RetryPolicy.
	PathWorker Path = "worker"
	// PathAfterCommit: the writer's PublishNow. A failure is not counted;
	// the record is left for the worker.
	PathAfterCommit Path = "after_commit"
)

// observe hands an event to the Observer, if there is one.
func (w *Worker) observe(ctx context.Context, e Event) {
	if w.opts.Observer == nil {
		return
	}
	e.Worker = w.opts.Name
	w.opts.Observer.Observe(ctx, e)
}
