package mysql

import (
	"context"
	"database/sql"
	"errors"
)

// The hand-over of messages to the named consumers.
//
// The Store delivers through the status columns of the outbox table: it
// is the table's default consumer, and those columns keep meaning "the
// default consumer has handled it". Further consumers each keep their
// own delivery state in the consumption table, one row per consumer and
// message, with its own status, retry_count, last_error, schedule and
// lease: a consumer's failures, backlog and dead letters never touch
// another's rows.
//
// A message is written once, into the outbox table. It is handed over to
// the named consumers (a consumption row for each that is to get it) by
// whichever named consumer claims next, in a short transaction before
// its claim: the messages whose fanout flag is still 0 (idx_fanout finds
// them) get their rows, and the flag is set. That transaction reads the
// outbox rows without locking them, so it never holds up the default
// consumer; it locks the consumer registry in share mode, so that a
// consumer being added or removed at that moment is either in or out,
// never half. Setting the flag does lock the outbox rows, briefly, and
// skips (SKIP LOCKED) any the default consumer holds at that moment: their
// flag is set next time (handing over again is a no-op).
//
// A consumer added "from now" gets the messages written after it was
// added; one added "from the beginning" also gets every message still
// retained, handed over in id order in batches by its own claims
// (backfill), while newer messages wait for the backfill to reach them,
// so that per-key order holds for it too.

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
		tx, err := s.db.BeginTx(ctx, readCommitted)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var (
			registered bool
			minStart   uint64
		)
		registered, backfilling, minStart, err = s.shareRegistry(ctx, tx, name)
		if err != nil {
			return err
		}
		if !registered {
			return ErrUnknownConsumer
		}
		fresh, err := column[uint64](ctx, tx, freshSQL(s.t, minStart, limit))
		if err != nil || len(fresh) == 0 {
			return err
		}
		if _, err := handOverSQL(s.t, fresh).exec(ctx, tx); err != nil {
			return err
		}
		// Flag what can be flagged without waiting; the rest is handed
		// over again (a no-op) and flagged next time.
		flag, err := column[uint64](ctx, tx, lockFlagsSQL(s.t, fresh))
		if err != nil {
			return err
		}
		if len(flag) > 0 {
			if _, err := setFlagsSQL(s.t, flag).exec(ctx, tx); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	return backfilling, err
}

// shareRegistry locks the consumer registry in share mode, so that no
// consumer is added or removed before tx commits, and reads whether
// consumer name is registered and backfilling, and the lowest start of
// every consumer.
func (s *Store) shareRegistry(ctx context.Context, tx *sql.Tx, name string) (registered, backfilling bool, minStart uint64, err error) {
	rows, err := shareRegistrySQL(s.t).query(ctx, tx)
	if err != nil {
		return false, false, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n      string
			start  uint64
			cursor sql.NullInt64
		)
		if err := rows.Scan(&n, &start, &cursor); err != nil {
			return false, false, 0, err
		}
		if !registered && n == name {
			registered, backfilling = true, cursor.Valid
		}
		if minStart == 0 || start < minStart {
			minStart = start
		}
	}
	return registered, backfilling, minStart, rows.Err()
}

// backfill hands the next limit retained messages past consumer name's
// backfill cursor over to it, and moves the cursor; when it reaches the
// end, the backfill is done and new messages reach the consumer through
// handOver alone. Instances of one consumer take turns (the registry row
// is locked).
func (s *Store) backfill(ctx context.Context, name string, limit int) error {
	return retryTransient(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, readCommitted)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var cursor sql.NullInt64
		if err := lockBackfillSQL(s.t, name).queryRow(ctx, tx).Scan(&cursor); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrUnknownConsumer
			}
			return err
		}
		if !cursor.Valid {
			return nil // done meanwhile
		}
		next, err := column[uint64](ctx, tx, backfillNextSQL(s.t, cursor.Int64, limit))
		if err != nil {
			return err
		}
		if len(next) > 0 {
			if _, err := backfillSQL(s.t, name, next).exec(ctx, tx); err != nil {
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
		if _, err := moveBackfillSQL(s.t, name, moved).exec(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	})
}

// shareRegistrySQL reads the live consumers and locks them in share mode:
// every hand-over holds the registry so, and AddConsumer and
// RemoveConsumer lock it exclusively, so a consumer is in or out of a
// hand-over, never half.
func shareRegistrySQL(t *target) statement {
	return t.render("SELECT name, start_seq, backfill_cursor FROM {consumers} WHERE removing = 0 ORDER BY name LOCK IN SHARE MODE")
}

// freshSQL finds up to limit messages not handed over yet (idx_fanout),
// from the lowest start of any consumer.
func freshSQL(t *target, minStart uint64, limit int) statement {
	return t.render("SELECT id FROM {outbox} WHERE fanout = 0 AND id >= ? ORDER BY id LIMIT ?", minStart, limit)
}

// handOverSQL writes a row for every consumer that is to get the message
// and is not still backfilling below it, due at once: a head start the
// message was enqueued with is the default consumer's (a named
// consumer's own head start is written by its Enqueue, headStartRowsSQL).
// A row that exists already stays as it is,
// and is not locked: the NOT EXISTS reads it without a lock (the SELECT
// of an INSERT … SELECT is a consistent read under READ COMMITTED), where
// the duplicate key would lock it exclusively until the hand-over commits
// and a claim of the consumer, skipping locked rows, would pass it over.
// ON DUPLICATE KEY is left for a row another hand-over inserts meanwhile.
func handOverSQL(t *target, ids []uint64) statement {
	return t.renderList("INSERT INTO {consumption} (consumer, msg_id, event_id, event_key, event_type, created_at, next_attempt_at) SELECT k.name, o.id, o.event_id, o.event_key, o.event_type, o.created_at, UTC_TIMESTAMP(6) FROM {outbox} o JOIN {consumers} k ON k.removing = 0 AND k.start_seq <= o.id AND (k.backfill_cursor IS NULL OR o.id <= k.backfill_cursor) WHERE o.id IN ({list}) AND NOT EXISTS (SELECT 1 FROM {consumption} c WHERE c.consumer = k.name AND c.msg_id = o.id) ON DUPLICATE KEY UPDATE msg_id = msg_id", len(ids), anyArgs(ids)...)
}

// lockFlagsSQL locks the messages whose fanout flag can be set without
// waiting: it skips those a claim of the default consumer holds.
func lockFlagsSQL(t *target, ids []uint64) statement {
	return t.renderList("SELECT id FROM {outbox} WHERE id IN ({list}) FOR UPDATE SKIP LOCKED", len(ids), anyArgs(ids)...)
}

// setFlagsSQL marks messages as handed over.
func setFlagsSQL(t *target, ids []uint64) statement {
	return t.renderList("UPDATE {outbox} SET fanout = 1 WHERE id IN ({list})", len(ids), anyArgs(ids)...)
}

// lockBackfillSQL locks consumer name's registry row and reads its
// backfill cursor (NULL: done).
func lockBackfillSQL(t *target, name string) statement {
	return t.render("SELECT backfill_cursor FROM {consumers} WHERE name = ? AND removing = 0 FOR UPDATE", name)
}

// backfillNextSQL finds the next limit messages after the cursor.
func backfillNextSQL(t *target, cursor int64, limit int) statement {
	return t.render("SELECT id FROM {outbox} WHERE id > ? ORDER BY id LIMIT ?", cursor, limit)
}

// backfillSQL writes consumer name's rows for messages, due at once. A
// row that exists already (handed over meanwhile) stays as it is.
func backfillSQL(t *target, name string, ids []uint64) statement {
	args := make([]any, 0, len(ids)+2)
	args = append(args, name)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, name)
	// NOT EXISTS leaves the rows the consumer has unlocked (see handOverSQL).
	return t.renderList("INSERT INTO {consumption} (consumer, msg_id, event_id, event_key, event_type, created_at, next_attempt_at) SELECT ?, o.id, o.event_id, o.event_key, o.event_type, o.created_at, UTC_TIMESTAMP(6) FROM {outbox} o WHERE o.id IN ({list}) AND NOT EXISTS (SELECT 1 FROM {consumption} c WHERE c.consumer = ? AND c.msg_id = o.id) ON DUPLICATE KEY UPDATE msg_id = msg_id", len(ids), args...)
}

// moveBackfillSQL moves consumer name's backfill cursor (NULL: done).
func moveBackfillSQL(t *target, name string, cursor sql.NullInt64) statement {
	return t.render("UPDATE {consumers} SET backfill_cursor = ? WHERE name = ?", cursor, name)
}
