package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestClaimPlan keeps the claim query's plan: on a table with a large
// published history and a large backlog that is not yet due, the claim
// must be a range scan of idx_due without a filesort, and must read about
// as many index entries as it returns, not as many as the backlog holds.
// (Measured with a naive design: a filesort of a 52k backlog on every
// claim ran at 11 rows/s.)
func TestClaimPlan(t *testing.T) {
	d, s := migrated(t, "plan_outbox")
	ctx := context.Background()

	const (
		published = 100_000
		backlog   = 50_000 // pending, due in an hour (failing, retried later)
		due       = 60     // pending and due now
		limit     = 100
	)
	fill(t, d.DB, s.table, 0, published, "published", "UTC_TIMESTAMP(6) - INTERVAL 1 DAY")
	fill(t, d.DB, s.table, published, backlog, "pending", "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR")
	fill(t, d.DB, s.table, published+backlog, due, "pending", "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
	_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE "+s.table)
	require.NoError(t, err)

	query := strings.Replace(claimDueSQL(s.t, limit).text, "LIMIT ?", fmt.Sprintf("LIMIT %d", limit), 1)
	plan := explain(t, d.DB, query)
	t.Logf("claim plan: %v", plan)
	require.Equal(t, "idx_due", plan["key"], "the claim uses idx_due")
	require.NotContains(t, []string{"ALL", "index"}, plan["type"], "no full table or index scan")
	require.NotContains(t, plan["Extra"], "filesort", "no filesort")
	require.NotContains(t, plan["Extra"], "temporary", "no temporary table")

	// Count what the claim actually reads, in a transaction like its own.
	n, read := countReads(t, d.DB, query, readCommitted)
	require.Equal(t, due, n)
	t.Logf("claim of %d due rows read %d index entries (backlog %d pending not due, %d published)", due, read, backlog, published)
	require.LessOrEqual(t, read, int64(2*due+10), "the claim read %d index entries for %d due rows; the backlog is %d", read, due, backlog)
}

// migrated returns a fresh database with a migrated store on table.
func migrated(t *testing.T, table string) (*testutil.Database, *Store) {
	t.Helper()
	d := testutil.NewDatabase(t)
	s, err := New(d.DB, Options{Table: table})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	return d, s
}

// fill inserts n rows quickly with one INSERT … SELECT over generated
// numbers (portable to MySQL 8 and MariaDB).
func fill(t *testing.T, db *sql.DB, table string, offset, n int, status, next string) {
	t.Helper()
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	q := fmt.Sprintf("INSERT INTO `%s` (event_id, event_key, event_type, payload, status, created_at, next_attempt_at)"+
		" SELECT CONCAT('plan-', n + %d), CONCAT('room-', n %% 200), 'RoomUserJoined', 'x', '%s', UTC_TIMESTAMP(6), %s"+
		" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d AS n"+
		" FROM %s a, %s b, %s c, %s e, %s f, %s g) nums WHERE n < %d",
		table, offset, status, next, digits, digits, digits, digits, digits, digits, n)
	_, err := db.Exec(q)
	require.NoError(t, err)
}

// explain returns the single row of EXPLAIN for query, by column name.
func explain(t *testing.T, db *sql.DB, query string, args ...any) map[string]string {
	t.Helper()
	return testutil.Explain(t, db, query, args...)
}

// countReads runs query in a transaction of its own on one connection and
// returns the rows it returned and the index entries and rows it read
// (the session's Handler_read counters).
func countReads(t *testing.T, db *sql.DB, query string, opts *sql.TxOptions) (rows int, reads int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	before := handlerReads(t, conn)
	tx, err := conn.BeginTx(ctx, opts)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	r, err := tx.QueryContext(ctx, query)
	require.NoError(t, err)
	for r.Next() {
		rows++
	}
	require.NoError(t, r.Err())
	r.Close()
	return rows, handlerReads(t, conn) - before
}

// handlerReads sums the session's row-read counters.
func handlerReads(t *testing.T, conn *sql.Conn) int64 {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	require.NoError(t, err)
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		require.NoError(t, rows.Scan(&name, &v))
		sum += v
	}
	require.NoError(t, rows.Err())
	return sum
}

// TestKeyHeadsPlan keeps the ordered claim's key walk a loose index scan:
// one index read per key, however many records each key holds.
func TestKeyHeadsPlan(t *testing.T) {
	d, s := migrated(t, "heads_outbox")
	ctx := context.Background()
	fill(t, d.DB, s.table, 0, 40_000, "pending", "UTC_TIMESTAMP(6)") // 200 keys × 200 records
	_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE "+s.table)
	require.NoError(t, err)

	query := strings.NewReplacer("event_key > ?", "event_key > ''", "LIMIT ?", "LIMIT 100").Replace(keyHeadsSQL(s.t, "", 100).text)
	plan := explain(t, d.DB, query)
	t.Logf("key heads plan: %v", plan)
	require.Equal(t, "idx_status_key", plan["key"])
	require.Contains(t, plan["Extra"], "Using index for group-by", "a loose index scan")

	n, read := countReads(t, d.DB, query, nil)
	require.Equal(t, 100, n)
	t.Logf("100 key heads of 40,000 pending records read %d index entries", read)
	require.LessOrEqual(t, read, int64(2*100+10))

	// Locking the heads re-checks each is still its key's oldest pending
	// record: one more index probe per head, not a scan of the key.
	tx, err := d.DB.BeginTx(ctx, readCommitted)
	require.NoError(t, err)
	heads, err := readHeads(ctx, tx, keyHeadsSQL(s.t, "", 100))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	ids := make([]string, len(heads))
	for i, h := range heads {
		ids[i] = strconv.FormatUint(h.id, 10)
	}
	lockHeads := claimHeadsSQL(s.t, heads[:1], 100).text
	lock := strings.NewReplacer("IN (?)", "IN ("+strings.Join(ids, ", ")+")", "LIMIT ?", "LIMIT 100").Replace(lockHeads)
	n, read = countReads(t, d.DB, lock, readCommitted)
	require.Equal(t, 100, n)
	t.Logf("locking 100 key heads (each re-checked) read %d index entries", read)
	require.LessOrEqual(t, read, int64(5*100), "not a read of every record of each key (200 here)")

	// Whether records wait behind the heads taken (Batch.More): a few
	// entries of each key's range, not the key's 200 records.
	keys := make([]string, len(heads))
	for i, h := range heads {
		keys[i] = "'" + h.key + "'"
	}
	behind := strings.NewReplacer("IN (?)", "IN ("+strings.Join(keys, ", ")+")", "LIMIT ?", "LIMIT 101").Replace(pendingOfKeysSQL(s.t, []string{"x"}, 101).text)
	var count int
	require.NoError(t, d.DB.QueryRowContext(ctx, behind).Scan(&count))
	require.Equal(t, 101, count)
	_, read = countReads(t, d.DB, behind, readCommitted)
	t.Logf("records behind 100 heads: %d index entries read", read)
	require.LessOrEqual(t, read, int64(5*100), "stops at the first record past the heads")
}
