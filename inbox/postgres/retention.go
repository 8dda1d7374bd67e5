package postgres

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
)

// MaxPurgeBatch is the largest batch Purge accepts.
const MaxPurgeBatch = sqlinbox.MaxPurgeBatch

// Purge deletes the consumer's records of messages processed longer ago
// than olderThan (on the database clock), oldest first, and returns how
// many it deleted. A record's age counts from the end of its handler's
// transaction (see Process), so a message whose handler ran longer than
// olderThan is kept as long as any other; a message whose handler is
// still running is neither deleted nor waited for (its row is invisible
// to every other transaction until it commits).
//
// It deletes in batches of at most batch rows, each one short
// transaction of its own (one DELETE), until a batch deletes fewer than
// batch rows; ctx ends it between batches. A batch reads the oldest
// records through the index (consumer, processed_at), so it reads about
// as many rows as it deletes, however large the table, and it locks them
// with SKIP LOCKED: purges running at once on several instances delete
// different rows and never wait for each other. Other consumers' records
// are never touched. A deadlock, serialization failure, lock timeout or
// lost connection is retried (a batch is idempotent). Purge is safe for
// concurrent use.
//
// A message redelivered after its record was purged is processed again:
// the retention window must be longer than any redelivery can be late
// (DefaultRetention, 7 days, is the documented choice).
func (ib *Inbox) Purge(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	return ib.core.Purge(ctx, olderThan, batch)
}

// PurgeBatch is one batch of Purge: one DELETE in a READ COMMITTED
// transaction of its own (whatever the server's default), which sees no
// transaction in progress and locks only the rows it deletes. It finds
// as many old records as it deletes.
func (dialect) PurgeBatch(ctx context.Context, tx *sql.Tx, st sqlinbox.Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error) {
	n, err := sqlinbox.Exec(ctx, tx, st.Purge, consumer, olderThan.Seconds(), batch)
	return n, n, err
}
