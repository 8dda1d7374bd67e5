package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// MaxPurgeBatch is the largest batch Purge accepts.
const MaxPurgeBatch = 10000

// Purge deletes the consumer's records of messages processed longer ago
// than olderThan (on the database clock), oldest first, and returns how
// many it deleted. A record's age counts from the end of its handler's
// transaction (see Process), so a message whose handler ran longer than
// olderThan is kept as long as any other; a message whose handler is
// still running is neither deleted nor waited for.
//
// It deletes in batches of at most batch rows, each one short
// transaction of its own, until a batch finds fewer than batch rows; ctx
// ends it between batches. A batch reads the oldest records through the
// index (consumer, processed_at), without locks, then deletes those that
// are still older than the window by their primary key: it reads about as
// many rows as it deletes, however large the table, and locks only those.
// Other consumers' records are never touched. A deadlock, lock wait
// timeout or lost connection is retried (a batch is idempotent).
//
// A message redelivered after its record was purged is processed again:
// the retention window must be longer than any redelivery can be late
// (DefaultRetention, 7 days, is the documented choice).
func (ib *Inbox) Purge(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	if olderThan <= 0 || batch < 1 || batch > MaxPurgeBatch {
		return 0, fmt.Errorf("mysql inbox: purge: older than %v, batch %d: want a positive age and a batch of 1 to %d", olderThan, batch, MaxPurgeBatch)
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
		found, n, err := ib.purgeBatch(ctx, olderThan, batch)
		deleted += n
		if err != nil {
			return deleted, ib.wrap("purge", err)
		}
		if found < batch {
			return deleted, nil
		}
	}
}

// purgeBatch deletes one batch, retrying it while it conflicts. It
// returns how many old records it found and how many it deleted.
func (ib *Inbox) purgeBatch(ctx context.Context, olderThan time.Duration, batch int) (found, deleted int, err error) {
	policy := txproc.NewBackoff()
	for try := 1; ; try++ {
		found, deleted, err = ib.purgeOnce(ctx, olderThan, batch)
		if err == nil || !mysqlerr.IsTransient(err) || try >= ib.opts.MaxAttempts {
			return found, deleted, err
		}
		if werr := txproc.Pause(ctx, policy); werr != nil {
			return 0, 0, werr
		}
	}
}

// purgeOnce is one batch, in a READ COMMITTED transaction (whatever the
// server's default): the SELECT is a plain read, which takes no locks and
// sees no transaction in progress, and the DELETE locks only the rows it
// names. A single DELETE … ORDER BY processed_at LIMIT n would leave the
// choice of index to the optimizer, which for a consumer that owns most
// of the table reads the whole primary key range (and sorts it) and
// locks every row on the way, waiting for each message in progress.
//
// The DELETE checks the age again: a record deleted by another purge
// meanwhile and inserted again by a redelivery is a new record, and
// waiting for its transaction does not make it old.
func (ib *Inbox) purgeOnce(ctx context.Context, olderThan time.Duration, batch int) (found, deleted int, err error) {
	tx, err := ib.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = tx.Rollback() }()
	age := olderThan.Microseconds()
	rows, err := tx.QueryContext(ctx, ib.sql.purgeOldest, ib.consumer, age, batch)
	if err != nil {
		return 0, 0, err
	}
	args := []any{ib.consumer, age}
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, 0, err
		}
		args = append(args, id)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	found = len(args) - 2
	if found == 0 {
		return 0, 0, tx.Commit()
	}
	ids := strings.Repeat("?, ", found-1) + "?"
	res, err := tx.ExecContext(ctx, strings.Replace(ib.sql.purge, "{ids}", ids, 1), args...)
	if err != nil {
		return 0, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, 0, err
	}
	return found, int(n), tx.Commit()
}
