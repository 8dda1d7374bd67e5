package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

var (
	_ backend.StatsReader = (*Store)(nil)
	_ backend.Purger      = (*Store)(nil)
)

// Stats reports the default consumer's backlog: pending (and leased)
// records, dead letters, the age of the oldest pending record, and both
// counts by type. It reads only pending and dead records, through
// idx_key, never the published history (TestStatsPlan keeps that), so it
// is cheap to call every few seconds on a table with millions of
// published rows. ConsumerStore.Stats reports a named consumer's.
func (s *Store) Stats(ctx context.Context) (backend.Stats, error) {
	return s.stats(ctx)
}

// stats reads the channel's pending and dead records by status and type.
func (s *channel) stats(ctx context.Context) (backend.Stats, error) {
	rows, err := s.db.QueryContext(ctx, s.q.stats)
	if err != nil {
		return backend.Stats{}, s.wrap("stats", err)
	}
	defer rows.Close()
	st := backend.Stats{ByType: map[string]backend.TypeStats{}}
	for rows.Next() {
		var (
			status, typ string
			n, leased   int
			oldestMicro int64
		)
		if err := rows.Scan(&status, &typ, &n, &leased, &oldestMicro); err != nil {
			return backend.Stats{}, s.wrap("stats", err)
		}
		ts := st.ByType[typ]
		if status == string(outbox.StatusPending) {
			st.Pending += n
			st.Leased += leased
			ts.Pending += n
			st.OldestPending = max(st.OldestPending, time.Duration(oldestMicro)*time.Microsecond)
		} else {
			st.Dead += n
			ts.Dead += n
		}
		st.ByType[typ] = ts
	}
	if err := rows.Err(); err != nil {
		return backend.Stats{}, s.wrap("stats", err)
	}
	return st, nil
}

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
// again by every call, and retention of everything behind them goes on. One call reads at most maxPurgeWindows windows. Deadlocks and
// lock wait timeouts with concurrent claims and settles are retried here
// and never reach the caller.
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
		deleted, next, swept = 0, from, false
		tx, err := s.db.BeginTx(ctx, claimTxOptions)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		window, err := s.purgeWindowRows(ctx, tx, status, olderThan, from, limit)
		if err != nil {
			return err
		}
		if len(window) > 0 {
			next = window[len(window)-1]
		}
		swept = len(window) < limit
		if len(window) == 0 {
			return nil
		}
		finished := sqlStrings(s.finishedStatuses())
		ids := make([]any, len(window))
		for i, p := range window {
			ids[i] = p.seq
		}
		locked, err := column[uint64](ctx, tx, fmt.Sprintf(s.oq.purgeLockPrefix, finished)+placeholders(len(ids))+") FOR UPDATE", ids...)
		if err != nil || len(locked) == 0 {
			return err
		}
		if _, err := column[string](ctx, tx, s.oq.purgeLockConsumption+placeholders(len(locked))+") FOR UPDATE", anyArgs(locked)...); err != nil {
			return err
		}
		done, err := column[uint64](ctx, tx, fmt.Sprintf(s.oq.purgeFinishedPrefix, finished)+placeholders(len(locked))+")",
			append([]any{olderThan.Microseconds()}, anyArgs(locked)...)...)
		if err != nil || len(done) == 0 {
			return err
		}
		for _, q := range []string{s.oq.purgeConsumption, s.oq.purgeMessages} {
			res, err := tx.ExecContext(ctx, q+placeholders(len(done))+")", anyArgs(done)...)
			if err != nil {
				return err
			}
			if q == s.oq.purgeMessages {
				n, _ := res.RowsAffected()
				deleted = int(n)
			}
		}
		return tx.Commit()
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

// purgeWindowRows reads the positions of the next window of the sweep.
func (s *Store) purgeWindowRows(ctx context.Context, tx *sql.Tx, status string, olderThan time.Duration, from purgePos, limit int) ([]purgePos, error) {
	at := formatTime(from.at)
	rows, err := tx.QueryContext(ctx, s.oq.purgeWindow, status, olderThan.Microseconds(), at, at, from.seq, limit)
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
	finished := sqlStrings(s.finishedStatuses())
	var n int
	age := olderThan.Microseconds()
	if err := s.db.QueryRowContext(ctx, fmt.Sprintf(s.oq.countPurgeablePrefix, finished, finished), age, age).Scan(&n); err != nil {
		return 0, s.wrap("count purgeable", err)
	}
	return n, nil
}

// ListFilter selects records for List. Empty fields match everything.
type ListFilter struct {
	Status outbox.Status
	Type   string
	Key    string
	// AfterSeq pages: only records with a larger Seq.
	AfterSeq int64
	// Limit is the page size; 1 to MaxBatchSize.
	Limit int
}

// List returns a page of records in Seq (insert) order; pass the last
// one's Seq as the next AfterSeq. Undecodable records are listed with the
// fields that could be read.
func (s *Store) List(ctx context.Context, f ListFilter) ([]outbox.Record, error) {
	if f.Limit < 1 || f.Limit > outbox.MaxBatchSize {
		return nil, fmt.Errorf("mysql store: list: Limit %d: must be 1 to %d", f.Limit, outbox.MaxBatchSize)
	}
	conds, args := []string{"id > ?"}, []any{f.AfterSeq}
	for _, c := range []struct{ col, val string }{{"status", string(f.Status)}, {"event_type", f.Type}, {"event_key", f.Key}} {
		if c.val != "" {
			conds, args = append(conds, c.col+" = ?"), append(args, c.val)
		}
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM `%s` WHERE %s ORDER BY id LIMIT ?",
		recordColumns, s.table, strings.Join(conds, " AND ")), append(args, f.Limit)...)
	if err != nil {
		return nil, s.wrap("list", err)
	}
	defer rows.Close()
	var out []outbox.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, s.wrap("list", err)
		}
		out = append(out, r.rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list", err)
	}
	return out, nil
}
