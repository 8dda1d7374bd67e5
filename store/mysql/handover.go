package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// consumerQueries are the statements of the consumer registry and of the
// hand-over of messages to named consumers (see consumer.go).
type consumerQueries struct {
	lockAll, maxID, register, markRemoving, removingOf, unregister, dropState, list, startOf, infoOf string
	waitingFanout, waitingBackfill                                                                   string
	// hand-over
	shareAll, fresh, handOverPrefix, handOverSuffix, lockFlagPrefix, setFlagPrefix string
	// backfill
	backfillLock, backfillNext, backfillPrefix, backfillMove string
}

func buildConsumerQueries(table string) consumerQueries {
	t, c, k := "`"+table+"`", "`"+consumptionTable(table)+"`", "`"+consumersTable(table)+"`"
	insert := "INSERT INTO " + c + " (consumer, msg_id, event_id, event_key, event_type, created_at, next_attempt_at) "
	waiting := "SELECT event_type, COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0)" +
		" FROM (SELECT event_type, created_at FROM " + t + " WHERE %s ORDER BY id LIMIT ?) w GROUP BY event_type"
	return consumerQueries{
		lockAll:  "SELECT name, removing, COALESCE(add_token, '') FROM " + k + " ORDER BY name FOR UPDATE",
		maxID:    "SELECT COALESCE(MAX(id), 0) FROM " + t,
		register: "INSERT INTO " + k + " (name, start_seq, backfill_cursor, created_at, add_token) VALUES (?, ?, ?, UTC_TIMESTAMP(6), ?)",
		// Removal: mark, delete the state in batches, then unregister. A
		// consumer marked removing is out of every hand-over, claim and
		// retention decision from the moment the mark commits.
		markRemoving: "UPDATE " + k + " SET removing = 1 WHERE name = ?",
		removingOf:   "SELECT removing FROM " + k + " WHERE name = ?",
		unregister:   "DELETE FROM " + k + " WHERE name = ? AND removing = 1",
		dropState:    "DELETE FROM " + c + " WHERE consumer = ? LIMIT ?",
		list:         "SELECT name, start_seq, backfill_cursor, created_at, removing FROM " + k + " ORDER BY name",
		startOf:      "SELECT start_seq FROM " + k + " WHERE name = ? AND removing = 0",
		infoOf:       "SELECT start_seq, backfill_cursor FROM " + k + " WHERE name = ? AND removing = 0",
		// Not yet handed over: unflagged messages from the consumer's
		// start, or, while it backfills, everything past its cursor.
		waitingFanout:   fmt.Sprintf(waiting, "fanout = 0 AND id >= ?"),
		waitingBackfill: fmt.Sprintf(waiting, "id > ?"),

		shareAll: "SELECT name, start_seq, backfill_cursor FROM " + k + " WHERE removing = 0 ORDER BY name LOCK IN SHARE MODE",
		fresh:    "SELECT id FROM " + t + " WHERE fanout = 0 AND id >= ? ORDER BY id LIMIT ?",
		// A row for every consumer that is to get the message and is not
		// still backfilling below it. A message the default consumer has
		// not touched yet keeps its head start (a future due time that is
		// neither a retry nor a lease).
		handOverPrefix: insert + "SELECT k.name, o.id, o.event_id, o.event_key, o.event_type, o.created_at," +
			" CASE WHEN o.status = 'pending' AND o.retry_count = 0 AND o.lease_token IS NULL AND o.next_attempt_at > UTC_TIMESTAMP(6)" +
			" THEN o.next_attempt_at ELSE UTC_TIMESTAMP(6) END" +
			" FROM " + t + " o JOIN " + k + " k ON k.removing = 0 AND k.start_seq <= o.id AND (k.backfill_cursor IS NULL OR o.id <= k.backfill_cursor)" +
			" WHERE o.id IN (",
		handOverSuffix: ") ON DUPLICATE KEY UPDATE msg_id = msg_id",
		lockFlagPrefix: "SELECT id FROM " + t + " WHERE id IN (",
		setFlagPrefix:  "UPDATE " + t + " SET fanout = 1 WHERE id IN (",

		backfillLock: "SELECT backfill_cursor FROM " + k + " WHERE name = ? AND removing = 0 FOR UPDATE",
		backfillNext: "SELECT id FROM " + t + " WHERE id > ? ORDER BY id LIMIT ?",
		backfillPrefix: insert + "SELECT ?, o.id, o.event_id, o.event_key, o.event_type, o.created_at, UTC_TIMESTAMP(6)" +
			" FROM " + t + " o WHERE o.id IN (",
		backfillMove: "UPDATE " + k + " SET backfill_cursor = ? WHERE name = ?",
	}
}

// handOver gives the named consumers their rows for up to limit messages
// not handed over yet, oldest first, in one short READ COMMITTED
// transaction, and reports whether consumer name is backfilling. It
// returns ErrUnknownConsumer if name is not registered.
//
// Messages are handed over strictly in id order, so that a key's
// messages reach a consumer's rows oldest first and its key heads are
// right in ordering mode; an after-commit claim of named messages (IDs)
// therefore finds them only once everything older has been handed over,
// and otherwise leaves them to the worker.
func (s *Store) handOver(ctx context.Context, name string, limit int) (backfilling bool, err error) {
	err = retryTransient(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, claimTxOptions)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		registered, minStart := false, uint64(0)
		rows, err := tx.QueryContext(ctx, s.cq.shareAll)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				n      string
				start  uint64
				cursor sql.NullInt64
			)
			if err := rows.Scan(&n, &start, &cursor); err != nil {
				rows.Close()
				return err
			}
			if !registered && n == name {
				registered, backfilling = true, cursor.Valid
			}
			if minStart == 0 || start < minStart {
				minStart = start
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if !registered {
			return ErrUnknownConsumer
		}
		fresh, err := column[uint64](ctx, tx, s.cq.fresh, minStart, limit)
		if err != nil || len(fresh) == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.cq.handOverPrefix+placeholders(len(fresh))+s.cq.handOverSuffix, anyArgs(fresh)...); err != nil {
			return err
		}
		// Flag what can be flagged without waiting; the rest is handed
		// over again (a no-op) and flagged next time.
		flag, err := column[uint64](ctx, tx, s.cq.lockFlagPrefix+placeholders(len(fresh))+") FOR UPDATE SKIP LOCKED", anyArgs(fresh)...)
		if err != nil {
			return err
		}
		if len(flag) > 0 {
			if _, err := tx.ExecContext(ctx, s.cq.setFlagPrefix+placeholders(len(flag))+")", anyArgs(flag)...); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	return backfilling, err
}

// backfill hands the next limit retained messages past consumer name's
// backfill cursor over to it, and moves the cursor; when it reaches the
// end, the backfill is done and new messages reach the consumer through
// handOver alone. Instances of one consumer take turns (the registry row
// is locked).
func (s *Store) backfill(ctx context.Context, name string, limit int) error {
	return retryTransient(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, claimTxOptions)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var cursor sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.cq.backfillLock, name).Scan(&cursor); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrUnknownConsumer
			}
			return err
		}
		if !cursor.Valid {
			return nil // done meanwhile
		}
		next, err := column[uint64](ctx, tx, s.cq.backfillNext, cursor.Int64, limit)
		if err != nil {
			return err
		}
		if len(next) > 0 {
			if _, err := tx.ExecContext(ctx, s.cq.backfillPrefix+placeholders(len(next))+s.cq.handOverSuffix, append([]any{name}, anyArgs(next)...)...); err != nil {
				return err
			}
		}
		// Fewer than limit: past the last committed message. One whose
		// transaction commits later is still unflagged and reaches the
		// consumer through handOver.
		moved := sql.NullInt64{}
		if len(next) == limit {
			moved = sql.NullInt64{Int64: int64(next[len(next)-1]), Valid: true}
		}
		if _, err := tx.ExecContext(ctx, s.cq.backfillMove, moved, name); err != nil {
			return err
		}
		return tx.Commit()
	})
}
