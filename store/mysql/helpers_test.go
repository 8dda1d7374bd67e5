package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// migrated returns a fresh database with a migrated store on table.
func migrated(t *testing.T, table string) (*testutil.Database, *Store) {
	t.Helper()
	d := testutil.NewDatabase(t)
	s, err := New(d.DB, Options{Table: table})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	return d, s
}

// fill writes n messages quickly with one INSERT … SELECT over generated
// numbers (portable to MySQL 8 and MariaDB), IDs plan-<offset+i>, keys
// room-<i mod 200>.
func fill(t *testing.T, db *sql.DB, table string, offset, n int) {
	t.Helper()
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	q := fmt.Sprintf("INSERT INTO `%s` (event_id, event_key, event_type, payload, created_at)"+
		" SELECT CONCAT('plan-', n + %d), CONCAT('room-', n %% 200), 'RoomUserJoined', 'x', UTC_TIMESTAMP(6)"+
		" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d AS n"+
		" FROM %s a, %s b, %s c, %s e, %s f, %s g) nums WHERE n < %d ORDER BY n",
		table, offset, digits, digits, digits, digits, digits, digits, n)
	_, err := db.Exec(q)
	require.NoError(t, err)
}

// explainTable returns the row of EXPLAIN for query that reads table
// (its alias), by column name.
func explainTable(t *testing.T, db *sql.DB, table, query string, args ...any) map[string]string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		if row["table"] == table {
			return row
		}
	}
	require.NoError(t, rows.Err())
	t.Fatalf("EXPLAIN has no row for %s", table)
	return nil
}

// countReads runs query in a transaction of its own on one connection and
// returns the rows it returned and the index entries and rows it read
// (the session's Handler_read counters).
func countReads(t *testing.T, db *sql.DB, query string, opts *sql.TxOptions, args ...any) (rows int, reads int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	before := handlerReads(t, conn)
	tx, err := conn.BeginTx(ctx, opts)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	r, err := tx.QueryContext(ctx, query, args...)
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
