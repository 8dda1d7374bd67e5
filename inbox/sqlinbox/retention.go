package sqlinbox

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

// DefaultRetention is the retention window the packages document and
// their examples use: processed IDs are kept 7 days (NServiceBus keeps
// its deduplication records as long by default). Purge takes the window
// as an argument; the inbox deletes nothing by itself.
const DefaultRetention = 7 * 24 * time.Hour

// Purge deletes the consumer's records of messages processed longer ago
// than olderThan (on the database clock), oldest first, and returns how
// many it deleted (and reports them to the Observer). A record's age
// counts from the end of its handler's transaction (see Process), so a
// message whose handler ran longer than olderThan is kept as long as any
// other; a message whose handler is still running is neither deleted nor
// waited for.
//
// It deletes in batches of at most batch rows (1 to MaxPurgeBatch), each
// one short transaction of its own, until a batch finds fewer than batch
// old records; ctx ends it between batches. A batch reads the oldest
// records through the index (consumer, processed_at), so it reads about
// as many rows as it deletes, however large the table, and it locks only
// those (the database's package says how, and what purges on several
// instances at once do). Other consumers' records are never touched. A
// batch that conflicts (a deadlock, a lock timeout, a lost connection;
// on PostgreSQL also a serialization failure) is tried again, up to
// Options.MaxAttempts times: a batch is idempotent. Purge is safe for
// concurrent use.
//
// A message redelivered after its record was purged is processed again:
// the retention window must be longer than any redelivery can be late
// (DefaultRetention, 7 days, is the documented choice).
func (ib *Inbox) Purge(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	if olderThan <= 0 || batch < 1 || batch > MaxPurgeBatch {
		return 0, fmt.Errorf("%s: purge: older than %v, batch %d: want a positive age and a batch of 1 to %d", ib.d.Name(), olderThan, batch, MaxPurgeBatch)
	}
	deleted := 0
	defer func() {
		if deleted > 0 {
			txproc.Observe(ctx, ib.opts.Observer, inbox.Event{Kind: inbox.EventPurged, Consumer: ib.opts.Consumer, Count: deleted})
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
		if err == nil || !ib.d.IsTransient(err) || try >= ib.opts.MaxAttempts {
			return found, deleted, err
		}
		if werr := txproc.Pause(ctx, policy); werr != nil {
			return 0, 0, fmt.Errorf("%w (after: %v)", werr, err)
		}
	}
}

// purgeOnce is one batch, in a READ COMMITTED transaction (whatever the
// server's default), which sees no transaction in progress.
func (ib *Inbox) purgeOnce(ctx context.Context, olderThan time.Duration, batch int) (found, deleted int, err error) {
	tx, err := ib.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = tx.Rollback() }()
	found, deleted, err = ib.d.PurgeBatch(ctx, tx, ib.sql, ib.opts.Consumer, olderThan, batch)
	if err != nil {
		return 0, 0, err
	}
	return found, deleted, tx.Commit()
}
