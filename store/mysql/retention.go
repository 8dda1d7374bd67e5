package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var _ backend.Purger = (*Store)(nil)

// PurgePublished deletes up to limit messages that every consumer has
// finished with longer ago than olderThan (retention), oldest first, and
// returns how many. Finished means published by the default consumer
// (the outbox table's status) and by every named consumer that is to get
// the message; with Options.PurgeDead, dead counts as finished too. The
// age counts from the last of them to finish (each consumer's own finish
// time, on the database clock). A message's named-consumer state goes
// with it. Pending records, and by default dead letters, are never
// touched; nor is a record whose state changes while the purge looks at
// it (a requeue in progress, say): the purge locks the message and every
// consumer's record of it, waiting for transactions that hold them, and
// decides on what it then reads.
//
// It sweeps the finished records by age in windows of limit records,
// each in a short READ COMMITTED transaction that locks and deletes the
// ones no named consumer still needs, and goes on where the last call
// stopped: records a slow consumer still holds are passed over, not read
// again by every call, and retention of everything behind them goes on.
// One call reads at most 64 windows. Deadlocks and lock wait timeouts
// with concurrent claims and settles are retried here and never reach the
// caller.
func (s *Store) PurgePublished(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan <= 0 || limit < 1 || limit > outbox.MaxBatchSize {
		return 0, fmt.Errorf("mysql store: purge: older than %v, limit %d: want a positive age and a limit of 1 to %d", olderThan, limit, outbox.MaxBatchSize)
	}
	deleted, windows := 0, 0
	for _, status := range s.finishedStatuses() {
		for deleted < limit && windows < maxPurgeWindows {
			windows++
			n, swept, err := s.purgeWindow(ctx, status, olderThan, limit-deleted)
			if err != nil {
				return deleted, s.wrap("purge", err)
			}
			deleted += n
			if swept {
				break
			}
		}
	}
	return deleted, nil
}

// maxPurgeWindows bounds the windows one PurgePublished call reads.
const maxPurgeWindows = 64

// PurgeAll deletes every message PurgePublished would, now: one whole
// sweep over the finished records, in windows of batch records (one short
// transaction each, pause apart when they deleted something). It returns
// how many it deleted. For operators and tools; workers use
// PurgePublished, which bounds each call.
func (s *Store) PurgeAll(ctx context.Context, olderThan time.Duration, batch int, pause time.Duration) (int, error) {
	if olderThan <= 0 || batch < 1 || batch > outbox.MaxBatchSize {
		return 0, fmt.Errorf("mysql store: purge: older than %v, batch %d: want a positive age and a batch of 1 to %d", olderThan, batch, outbox.MaxBatchSize)
	}
	deleted := 0
	for _, status := range s.finishedStatuses() {
		s.purgeMu.Lock()
		delete(s.purgeCursor, status) // from the oldest
		s.purgeMu.Unlock()
		for {
			n, swept, err := s.purgeWindow(ctx, status, olderThan, batch)
			deleted += n
			if err != nil {
				return deleted, s.wrap("purge", err)
			}
			if swept {
				break
			}
			if n > 0 && pause > 0 {
				select {
				case <-ctx.Done():
					return deleted, s.wrap("purge", ctx.Err())
				case <-time.After(pause):
				}
			}
		}
	}
	return deleted, nil
}

// purgePos is where the retention sweep over one status goes on.
type purgePos struct {
	at  time.Time
	seq uint64
}

// finishedStatuses are the outbox statuses retention may delete.
func (s *Store) finishedStatuses() []string {
	if s.purgeDead {
		return []string{string(outbox.StatusPublished), string(outbox.StatusDead)}
	}
	return []string{string(outbox.StatusPublished)}
}

// purgeWindow reads the next window of up to limit records of status
// older than olderThan, deletes those that every named consumer has
// finished with, and moves the sweep on. swept reports that the window
// reached the end (the next window starts from the oldest again).
func (s *Store) purgeWindow(ctx context.Context, status string, olderThan time.Duration, limit int) (deleted int, swept bool, err error) {
	s.purgeMu.Lock()
	from := s.purgeCursor[status]
	s.purgeMu.Unlock()
	var next purgePos
	err = retryTransient(ctx, func() error {
		var err error
		deleted, next, swept, err = s.purgeWindowTx(ctx, status, olderThan, from, limit)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	if swept {
		next = purgePos{}
	}
	s.purgeMu.Lock()
	if s.purgeCursor == nil {
		s.purgeCursor = map[string]purgePos{}
	}
	s.purgeCursor[status] = next
	s.purgeMu.Unlock()
	return deleted, swept, nil
}

// purgeWindowTx is one try of purgeWindow: a transaction of its own.
func (s *Store) purgeWindowTx(ctx context.Context, status string, olderThan time.Duration, from purgePos, limit int) (deleted int, next purgePos, swept bool, err error) {
	tx, err := s.db.BeginTx(ctx, readCommitted)
	if err != nil {
		return 0, from, false, err
	}
	defer func() { _ = tx.Rollback() }()
	window, err := s.purgeWindowRows(ctx, tx, status, olderThan, from, limit)
	if err != nil || len(window) == 0 {
		return 0, from, err == nil, err
	}
	next, swept = window[len(window)-1], len(window) < limit
	if deleted, err = s.deleteFinished(ctx, tx, window, olderThan); err != nil {
		return 0, from, false, err
	}
	if err := tx.Commit(); err != nil {
		return 0, from, false, err
	}
	return deleted, next, swept, nil
}

// deleteFinished locks the records of the window that are still
// finished, and every named consumer's records of them, and deletes the
// messages that every named consumer has finished with too, longer ago
// than olderThan. It returns how many it deleted.
func (s *Store) deleteFinished(ctx context.Context, tx *sql.Tx, window []purgePos, olderThan time.Duration) (int, error) {
	locked, err := column[uint64](ctx, tx, lockFinishedSQL(s.t, window))
	if err != nil || len(locked) == 0 {
		return 0, err
	}
	if _, err := column[string](ctx, tx, lockConsumptionSQL(s.t, locked)); err != nil {
		return 0, err
	}
	done, err := column[uint64](ctx, tx, finishedEverywhereSQL(s.t, olderThan, locked))
	if err != nil || len(done) == 0 {
		return 0, err
	}
	if _, err := deleteConsumptionSQL(s.t, done).exec(ctx, tx); err != nil {
		return 0, err
	}
	n, err := deleteMessagesSQL(s.t, done).exec(ctx, tx)
	return int(n), err
}

// purgeWindowRows reads the positions of the next window of the sweep.
func (s *Store) purgeWindowRows(ctx context.Context, tx *sql.Tx, status string, olderThan time.Duration, from purgePos, limit int) ([]purgePos, error) {
	rows, err := purgeWindowSQL(s.t, status, olderThan, from, limit).query(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []purgePos
	for rows.Next() {
		var (
			p  purgePos
			at dbTime
		)
		if err := rows.Scan(&p.seq, &at); err != nil {
			return nil, err
		}
		p.at = at.t
		out = append(out, p)
	}
	return out, rows.Err()
}

// CountPurgeable counts the messages PurgePublished would delete: a dry
// run. It reads every finished record older than olderThan.
func (s *Store) CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error) {
	var n int
	if err := countPurgeableSQL(s.t, olderThan).queryRow(ctx, s.db).Scan(&n); err != nil {
		return 0, s.wrap("count purgeable", err)
	}
	return n, nil
}

// purgeWindowSQL reads one window of the sweep over finished records of
// status, by age, after the cursor from (next_attempt_at, id): a range of
// idx_due in index order (TestStatsAndRetentionOnAMillionPublishedRows).
func purgeWindowSQL(t *target, status string, olderThan time.Duration, from purgePos, limit int) statement {
	at := formatTime(from.at)
	return t.render("SELECT id, next_attempt_at FROM {outbox} WHERE status = ? AND next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND (next_attempt_at > ? OR (next_attempt_at = ? AND id > ?)) ORDER BY next_attempt_at, id LIMIT ?",
		status, olderThan.Microseconds(), at, at, from.seq, limit)
}

// lockFinishedSQL locks the records of the window that are still
// finished, waiting rather than skipping: only short transactions hold
// finished records.
func lockFinishedSQL(t *target, window []purgePos) statement {
	args := make([]any, len(window))
	for i, p := range window {
		args[i] = p.seq
	}
	return t.renderList("SELECT id FROM {outbox} WHERE status IN ({finished}) AND id IN ({list}) FOR UPDATE", len(window), args...)
}

// lockConsumptionSQL locks the named consumers' records of messages, so
// that finishedEverywhereSQL reads state nobody can change before the
// delete (say, a requeue of a dead letter).
func lockConsumptionSQL(t *target, ids []uint64) statement {
	return t.renderList("SELECT consumer FROM {consumption} WHERE msg_id IN ({list}) FOR UPDATE", len(ids), anyArgs(ids)...)
}

// finishedEverywhereSQL keeps, of messages, those that every named
// consumer that is to get them has finished with longer ago than
// olderThan.
func finishedEverywhereSQL(t *target, olderThan time.Duration, ids []uint64) statement {
	args := make([]any, 0, len(ids)+1)
	args = append(args, olderThan.Microseconds())
	for _, id := range ids {
		args = append(args, id)
	}
	return t.renderList("SELECT o.id FROM {outbox} o WHERE NOT EXISTS (SELECT 1 FROM {consumers} k WHERE k.removing = 0 AND k.start_seq <= o.id AND NOT EXISTS (SELECT 1 FROM {consumption} c WHERE c.consumer = k.name AND c.msg_id = o.id AND c.status IN ({finished}) AND c.next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)) AND o.id IN ({list})", len(ids), args...)
}

// deleteConsumptionSQL deletes the named consumers' records of messages.
func deleteConsumptionSQL(t *target, ids []uint64) statement {
	return t.renderList("DELETE FROM {consumption} WHERE msg_id IN ({list})", len(ids), anyArgs(ids)...)
}

// deleteMessagesSQL deletes messages.
func deleteMessagesSQL(t *target, ids []uint64) statement {
	return t.renderList("DELETE FROM {outbox} WHERE id IN ({list})", len(ids), anyArgs(ids)...)
}

// countPurgeableSQL counts the messages retention would delete now.
func countPurgeableSQL(t *target, olderThan time.Duration) statement {
	age := olderThan.Microseconds()
	return t.render("SELECT COUNT(*) FROM {outbox} o WHERE o.status IN ({finished}) AND o.next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND NOT EXISTS (SELECT 1 FROM {consumers} k WHERE k.removing = 0 AND k.start_seq <= o.id AND NOT EXISTS (SELECT 1 FROM {consumption} c WHERE c.consumer = k.name AND c.msg_id = o.id AND c.status IN ({finished}) AND c.next_attempt_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))", age, age)
}
