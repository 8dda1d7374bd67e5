package mysql

import (
	"context"
	"database/sql"
	"strings"
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
	return ib.core.Purge(ctx, olderThan, batch)
}

// PurgeBatch is one batch of Purge, in a READ COMMITTED transaction
// (whatever the server's default): the SELECT is a plain read, which
// takes no locks and sees no transaction in progress, and the DELETE
// locks only the rows it names. A single DELETE … ORDER BY processed_at LIMIT n would leave the
// choice of index to the optimizer, which for a consumer that owns most
// of the table reads the whole primary key range (and sorts it) and
// locks every row on the way, waiting for each message in progress.
//
// The DELETE checks the age again: a record deleted by another purge
// meanwhile and inserted again by a redelivery is a new record, and
// waiting for its transaction does not make it old.
func (dialect) PurgeBatch(ctx context.Context, tx *sql.Tx, st sqlinbox.Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error) {
	age := olderThan.Microseconds()
	rows, err := tx.QueryContext(ctx, st.PurgeOldest, consumer, age, batch)
	if err != nil {
		return 0, 0, err
	}
	args := []any{consumer, age}
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
		return 0, 0, nil
	}
	ids := strings.Repeat("?, ", found-1) + "?"
	deleted, err = sqlinbox.Exec(ctx, tx, strings.Replace(st.Purge, "{ids}", ids, 1), args...)
	return found, deleted, err
}
