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
	// EventClaimFailed: a claim failed (Err); the round ended.
	EventClaimFailed
	// EventSettleFailed: outcomes could not be recorded (Err); their
	// records are delivered again after the lease expires.
	EventSettleFailed
	// EventPurged: retention deleted Count published records.
	EventPurged
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
	}
	return "unknown"
}

// Event is one thing a worker did.
type Event struct {
	Kind EventKind
	// Worker is WorkerOptions.Name.
	Worker string
	// Path is "worker" for the background rounds and "after_commit" for
	// PublishNow.
	Path string
	// Record is the record concerned, for publish and dead events.
	Record Record
	// Latency is how long the sink call took, for publish events.
	Latency time.Duration
	// Err is the failure, for failure and dead events.
	Err error
	// Count is how many records, for EventPurged.
	Count int
}

// Stats is a snapshot of a store's backlog.
type Stats struct {
	// Pending counts pending records, Leased those of them a worker holds
	// right now (a lease that has expired, say of a worker that died, no
	// longer counts), Dead the dead letters.
	Pending, Leased, Dead int
	// OldestPending is the age of the oldest pending record (zero with
	// none), by the store's clock.
	OldestPending time.Duration
	// ByType breaks Pending and Dead down by message type.
	ByType map[string]TypeStats
}

// TypeStats are the counts of one message type.
type TypeStats struct {
	Pending, Dead int
}

// StatsReader is a store that reports its backlog; store/mysql is one.
type StatsReader interface {
	Stats(ctx context.Context) (Stats, error)
}

// Purger is a store that can delete published records (retention);
// store/mysql is one. PurgePublished deletes up to limit records published
// longer ago than olderThan and returns how many it deleted. It never
// touches pending records, nor dead letters unless the store is
// configured to treat them as finished (store/mysql: Options.PurgeDead).
type Purger interface {
	PurgePublished(ctx context.Context, olderThan time.Duration, limit int) (int, error)
}
