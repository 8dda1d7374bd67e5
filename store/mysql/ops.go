package mysql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

var (
	_ outbox.StatsReader = (*Store)(nil)
	_ outbox.Purger      = (*Store)(nil)
)

// Stats reports the backlog: pending (and leased) records, dead letters,
// the age of the oldest pending record, and both counts by type. It reads
// only pending and dead records, through idx_key, never the published
// history (TestStatsPlan keeps that), so it is cheap to call every few
// seconds on a table with millions of published rows.
func (s *Store) Stats(ctx context.Context) (outbox.Stats, error) {
	rows, err := s.db.QueryContext(ctx, s.q.stats)
	if err != nil {
		return outbox.Stats{}, s.wrap("stats", err)
	}
	defer rows.Close()
	st := outbox.Stats{ByType: map[string]outbox.TypeStats{}}
	for rows.Next() {
		var (
			status, typ string
			n, leased   int
			oldestMicro int64
		)
		if err := rows.Scan(&status, &typ, &n, &leased, &oldestMicro); err != nil {
			return outbox.Stats{}, s.wrap("stats", err)
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
		return outbox.Stats{}, s.wrap("stats", err)
	}
	return st, nil
}

// PurgePublished deletes up to limit records published longer ago than
// olderThan (retention), oldest first, in one short READ COMMITTED
// transaction, and returns how many. It never touches pending or dead
// records. Deadlocks and lock wait timeouts with concurrent claims and
// settles are retried here and never reach the caller.
func (s *Store) PurgePublished(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if olderThan <= 0 || limit < 1 || limit > outbox.MaxBatchSize {
		return 0, fmt.Errorf("mysql store: purge: older than %v, limit %d: want a positive age and a limit of 1 to %d", olderThan, limit, outbox.MaxBatchSize)
	}
	var deleted int64
	err := retryTransient(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, claimTxOptions)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		res, err := tx.ExecContext(ctx, s.q.purge, olderThan.Microseconds(), limit)
		if err != nil {
			return err
		}
		if deleted, err = res.RowsAffected(); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, s.wrap("purge", err)
	}
	return int(deleted), nil
}

// CountPurgeable counts the records PurgePublished would delete: a dry
// run.
func (s *Store) CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, s.q.countPurgeable, olderThan.Microseconds()).Scan(&n); err != nil {
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

// Verify checks that the table exists and has what the store needs,
// without creating or changing anything (Migrate does that). Tools call
// it first, so that a wrong table name fails with a clear error.
func (s *Store) Verify(ctx context.Context) error {
	columns, err := s.names(ctx, columnNamesQuery)
	if err != nil {
		return err
	}
	if len(columns) == 0 {
		return fmt.Errorf("mysql store: table %q does not exist in this database (run Store.Migrate)", s.table)
	}
	if missing := missingNames("column", requiredColumns, columns); len(missing) > 0 {
		return s.notOurs("verify", missing)
	}
	indexes, err := s.names(ctx, indexNamesQuery)
	if err != nil {
		return err
	}
	if missing := missingNames("index", requiredIndexes, indexes); len(missing) > 0 {
		return fmt.Errorf("mysql store: verify: table %q lacks %s: run Store.Migrate to upgrade it", s.table, strings.Join(missing, ", "))
	}
	return nil
}
