package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	storemysql "github.com/outboxrelay/outboxrelay/store/mysql"
)

// MaxPurgeBatch is the largest batch Purge accepts.
const MaxPurgeBatch = 10000

// Purge deletes the consumer's records of messages processed longer ago
// than olderThan (on the database clock), oldest first, and returns how
// many it deleted. It deletes in batches of at most batch rows, each one
// statement and one short transaction of its own, until a batch finds
// fewer than batch rows; ctx ends it between batches. Other consumers'
// records are never touched. A deadlock, lock wait timeout or lost
// connection is retried (a batch is idempotent).
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
			ib.observe(ctx, inbox.Event{Kind: inbox.EventPurged, Consumer: ib.consumer, Count: deleted})
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

// purgeBatch deletes one batch, retrying it while it conflicts.
func (ib *Inbox) purgeBatch(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	policy := newBackoff()
	for try := 1; ; try++ {
		res, err := ib.db.ExecContext(ctx, ib.sql.purge, ib.consumer, olderThan.Microseconds(), batch)
		if err == nil {
			n, err := res.RowsAffected()
			return int(n), err
		}
		if !storemysql.IsTransient(err) || try >= ib.opts.MaxAttempts {
			return 0, err
		}
		if werr := pause(ctx, policy); werr != nil {
			return 0, werr
		}
	}
}
