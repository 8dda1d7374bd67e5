package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// cutOverMarker is the statement of the upgrade to version 9 that
// Store.cutOver runs (upgrade_9.sql).
const cutOverMarker = "{cut-over}"

// cutOverText is what SchemaSQL prints for the cut-over.
const cutOverText = `-- The cut-over to version 9, which Migrate runs (it is not one SQL
-- statement). With every version 8 worker stopped, in one transaction
-- under LOCK TABLES on the outbox table and its companions (which waits
-- for the transactions that wrote to them, and keeps writers out until
-- it commits):
--   1. it refuses while a record is leased (lease_until in the future);
--   2. it gives the named consumers ids 1, 2, … by name, and registers
--      the default consumer (id 0, name '');
--   3. every pending or dead record of the outbox table becomes a state
--      row of the default consumer, whose position is then the last
--      message written: what is behind it without a state row was
--      published;
--   4. every record of <table>_consumption becomes a state row of its
--      consumer (published ones only past the consumer's position), and
--      each consumer's position is the message before the first one not
--      yet handed over to it (or the backfill's cursor, if lower).`

// cutOver moves the delivery state of version 8 to the log of version 9
// (cutOverText), on conn. It does nothing when the default consumer is
// registered already (a cut-over that committed, and a Migrate that
// stopped after it).
func (s *Store) cutOver(ctx context.Context, conn *sql.Conn) (err error) {
	names := schemaNames(s.table) // the table of version 8 too
	var done int
	if err := conn.QueryRowContext(ctx, names.Replace("SELECT COUNT(*) FROM {consumers} WHERE name = ''")).Scan(&done); err != nil {
		return s.wrap("migrate to schema version 9: cut-over", err)
	}
	if done > 0 {
		return nil
	}
	// LOCK TABLES with autocommit off is how InnoDB tables are locked
	// within a transaction (the MySQL manual, "LOCK TABLES and
	// Transactions"): COMMIT, then UNLOCK TABLES.
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		return s.wrap("migrate to schema version 9: cut-over", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
		_, _ = conn.ExecContext(context.Background(), "UNLOCK TABLES")
		_, _ = conn.ExecContext(context.Background(), "SET autocommit = 1")
	}()
	if _, err := conn.ExecContext(ctx, names.Replace("LOCK TABLES {outbox} WRITE, {consumers} WRITE, {consumption} WRITE, {state} WRITE, {ranges} WRITE, {gaps} WRITE")); err != nil {
		return s.wrap("migrate to schema version 9: cut-over: lock the tables", err)
	}
	if err := s.cutOverLocked(ctx, conn); err != nil {
		return s.wrap("migrate to schema version 9: cut-over", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return s.wrap("migrate to schema version 9: cut-over", err)
	}
	return nil
}

func (s *Store) cutOverLocked(ctx context.Context, conn *sql.Conn) error {
	names := schemaNames(s.table)
	var leased int
	if err := conn.QueryRowContext(ctx, names.Replace(`SELECT (SELECT COUNT(*) FROM {outbox} WHERE status = 'pending' AND lease_id > 0 AND lease_until > UTC_TIMESTAMP(6))
	+ (SELECT COUNT(*) FROM {consumption} WHERE status = 'pending' AND lease_id > 0 AND lease_until > UTC_TIMESTAMP(6))`)).Scan(&leased); err != nil {
		return err
	}
	if leased > 0 {
		return fmt.Errorf("%d records are leased to workers of version 8: stop them (or wait for their leases to end), then run Migrate again", leased)
	}
	type named struct {
		name     string
		start    uint64
		backfill sql.NullInt64
		id       uint32
		walked   uint64
	}
	rows, err := conn.QueryContext(ctx, names.Replace("SELECT name, start_seq, backfill_cursor FROM {consumers} ORDER BY name"))
	if err != nil {
		return err
	}
	var consumers []named
	for rows.Next() {
		var c named
		if err := rows.Scan(&c.name, &c.start, &c.backfill); err != nil {
			rows.Close()
			return err
		}
		c.id = uint32(len(consumers) + 1)
		consumers = append(consumers, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	var last uint64
	if err := conn.QueryRowContext(ctx, names.Replace("SELECT COALESCE(MAX(id), 0) FROM {outbox}")).Scan(&last); err != nil {
		return err
	}
	exec := func(q string, args ...any) error {
		_, err := conn.ExecContext(ctx, names.Replace(q), args...)
		return err
	}
	// The default consumer: its pending and dead records (a leased one
	// due when its lease would have ended), then its position.
	if err := exec(`INSERT INTO {state} (consumer_id, id, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
SELECT 0, id, event_key, status, retry_count, COALESCE(last_error, ''),
	CASE WHEN status = 'pending' AND lease_id < 0 THEN UTC_TIMESTAMP(6)
		WHEN status = 'pending' AND lease_id > 0 AND lease_until > next_attempt_at THEN lease_until ELSE next_attempt_at END,
	IF(status = 'pending', ` + noTime + `, next_attempt_at)
FROM {outbox} WHERE status IN ('pending', 'dead')`); err != nil {
		return err
	}
	if err := exec("INSERT INTO {consumers} (id, name, walked, start_seq, created_at) VALUES (0, '', ?, 0, UTC_TIMESTAMP(6))", last); err != nil {
		return err
	}
	for _, c := range consumers {
		// The first message not yet handed over to it.
		c.walked = last
		var first sql.NullInt64
		if err := conn.QueryRowContext(ctx, names.Replace("SELECT MIN(id) FROM {outbox} WHERE fanout = 0 AND id >= ?"), c.start).Scan(&first); err != nil {
			return err
		}
		if first.Valid {
			c.walked = uint64(first.Int64) - 1
		}
		if c.backfill.Valid {
			c.walked = min(c.walked, uint64(c.backfill.Int64))
		}
		if err := exec(`INSERT INTO {state} (consumer_id, id, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
SELECT ?, msg_id, event_key, status, retry_count, COALESCE(last_error, ''),
	CASE WHEN status = 'pending' AND lease_id < 0 THEN UTC_TIMESTAMP(6)
		WHEN status = 'pending' AND lease_id > 0 AND lease_until > next_attempt_at THEN lease_until ELSE next_attempt_at END,
	IF(status = 'pending', `+noTime+`, next_attempt_at)
FROM {consumption} WHERE consumer = ? AND (status <> 'published' OR msg_id > ?)`, c.id, c.name, c.walked); err != nil {
			return err
		}
		start := c.start
		if start > 0 {
			start-- // version 9 keeps the last message before its first
		}
		if err := exec("UPDATE {consumers} SET id = ?, walked = ?, start_seq = ? WHERE name = ?", c.id, c.walked, start, c.name); err != nil {
			return err
		}
	}
	return nil
}
