package backend

import (
	"context"
	"time"
)

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
