package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
)

// MaxPurgeBatch is the largest batch Purge accepts.
const MaxPurgeBatch = 10000

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
	if olderThan <= 0 || batch < 1 || batch > MaxPurgeBatch {
		return 0, fmt.Errorf("postgres inbox: purge: older than %v, batch %d: want a positive age and a batch of 1 to %d", olderThan, batch, MaxPurgeBatch)
	}
	deleted := 0
	defer func() {
		if deleted > 0 {
			txproc.Observe(ctx, ib.opts.Observer, inbox.Event{Kind: inbox.EventPurged, Consumer: ib.consumer, Count: deleted})
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return deleted, ib.wrap("purge", err)
		}
		n, err := ib.purgeBatch(ctx, olderThan, batch)
		deleted += n
		if err != nil {
			return deleted, ib.wrap("purge", err)
		}
		if n < batch {
			return deleted, nil
		}
	}
}

// purgeBatch deletes one batch, retrying it while it conflicts, and
// returns how many records it deleted.
func (ib *Inbox) purgeBatch(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	policy := txproc.NewBackoff()
	for try := 1; ; try++ {
		n, err := ib.purgeOnce(ctx, olderThan, batch)
		if err == nil || !isTransient(err) || try >= ib.opts.MaxAttempts || ctx.Err() != nil {
			return n, err
		}
		if werr := txproc.Pause(ctx, policy); werr != nil {
			return 0, fmt.Errorf("%w (after: %v)", werr, err)
		}
	}
}

// purgeOnce is one batch: one DELETE in a READ COMMITTED transaction of
// its own (whatever the server's default), which sees no transaction in
// progress and locks only the rows it deletes.
func (ib *Inbox) purgeOnce(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	tx, err := ib.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, ib.sql.purge, ib.consumer, olderThan.Seconds(), batch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}
