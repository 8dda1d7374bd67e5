package inbox

import (
	"context"
	"time"
)

// Observer receives what an inbox does, for metrics (outbox/outboxprom
// implements it with Prometheus: NewInboxMetrics). Observe is called on
// the goroutine that called Process or Purge: it must be quick and safe
// for concurrent use.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// EventKind says what an Event is about.
type EventKind int

// The events an inbox reports. Every Process call ends with exactly one
// of EventProcessed, EventDuplicate, EventHandlerFailed and EventFailed
// (none for an invalid ID), after any number of EventConflict.
const (
	// EventProcessed: the handler's writes committed (Duration: the
	// whole Process call; Attempts: the transactions it took).
	EventProcessed EventKind = iota + 1
	// EventDuplicate: the ID had been processed; the handler did not run
	// (Duration, Attempts).
	EventDuplicate
	// EventHandlerFailed: the handler returned an error or panicked (Err),
	// and everything was rolled back (Duration, Attempts).
	EventHandlerFailed
	// EventFailed: Process failed for another reason (Err): the database
	// failed, a conflict persisted beyond the retry bound, or ctx ended.
	EventFailed
	// EventConflict: a transaction was rolled back by a deadlock, a lock
	// wait timeout or a lost connection (Err), and is tried again.
	EventConflict
	// EventPurged: retention deleted Count processed IDs.
	EventPurged
)

func (k EventKind) String() string {
	switch k {
	case EventProcessed:
		return "processed"
	case EventDuplicate:
		return "duplicate"
	case EventHandlerFailed:
		return "handler_failed"
	case EventFailed:
		return "failed"
	case EventConflict:
		return "conflict"
	case EventPurged:
		return "purged"
	}
	return "unknown"
}

// Event is one thing an inbox did.
type Event struct {
	Kind EventKind
	// Consumer is the inbox's consumer name.
	Consumer string
	// ID is the message ID, for the events of Process.
	ID string
	// Duration is how long the Process call took, for its final event.
	Duration time.Duration
	// Attempts is how many transactions the Process call began (1 unless
	// conflicts were retried), for its final event and EventConflict.
	Attempts int
	// Err is the failure, for EventHandlerFailed, EventFailed and
	// EventConflict.
	Err error
	// Count is how many IDs, for EventPurged.
	Count int
}
