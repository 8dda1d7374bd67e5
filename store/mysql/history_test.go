package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestOrderedClaimsReadNoHistory (issue 28, defect 3): switching
// Ordering on over a history that workers without it published neither
// stalls a key nor makes claims read that history. With 20,000 published
// records of one key and 20,000 published unkeyed records, the first
// ordered claim takes the key's new record, another key's and the new
// unkeyed one, and reads about as many rows as it returns. (Schema
// version 7 took 79 claims to reach the key's new record, and read the
// whole unkeyed history once a second; from version 9 a claim reads the
// log past the consumer's position.)
func TestOrderedClaimsReadNoHistory(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	newStore(t, d.DB)
	const history = 20_000
	fillDelivered(t, d.DB, "K", history)
	fillDelivered(t, d.DB, "", history)
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "k-new", Key: "K", Type: "T"},
		outbox.Message{ID: "o-new", Key: "O", Type: "T"}, outbox.Message{ID: "u-new", Type: "T"}))
	_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE "+testTable)
	require.NoError(t, err)

	// One connection, so that the session's handler counters see the claim.
	one, err := sql.Open("mysql", d.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = one.Close() })
	one.SetMaxOpenConns(1)
	so, err := mysql.New(one, mysql.Options{Table: testTable})
	require.NoError(t, err)
	for i := range 2 { // the second claim finds nothing: it must read nothing of the history either
		before := sessionReads(t, one)
		b, err := so.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		read := sessionReads(t, one) - before
		t.Logf("ordered claim %d over %d published records of K and %d unkeyed: %d claimed, %d rows read", i+1, history, history, b.Len(), read)
		if i == 0 {
			require.ElementsMatch(t, []string{"k-new", "o-new", "u-new"}, recordIDs(b.Records), "every head at once")
		} else {
			require.Zero(t, b.Len())
		}
		require.Less(t, read, int64(200), "the claim read %d rows: the history is %d records", read, 2*history)
	}
}

// sessionReads sums the Handler_read counters of db's one connection.
func sessionReads(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	rows, err := db.Query("SHOW SESSION STATUS LIKE 'Handler_read%'")
	require.NoError(t, err)
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var (
			name string
			v    int64
		)
		require.NoError(t, rows.Scan(&name, &v))
		sum += v
	}
	require.NoError(t, rows.Err())
	return sum
}

// fillDelivered writes n messages of key and moves the default
// consumer's position past them, as workers without ordering that
// delivered them leave the tables (one INSERT … SELECT over generated
// numbers).
func fillDelivered(t *testing.T, db *sql.DB, key string, n int) {
	t.Helper()
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	_, err := db.Exec(fmt.Sprintf("INSERT INTO room_outbox (event_id, event_key, event_type, payload, created_at)"+
		" SELECT CONCAT('hist-', ?, '-', n), ?, 'T', 'p', UTC_TIMESTAMP(6)"+
		" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d AS n FROM %s a, %s b, %s c, %s e, %s f, %s g) nums WHERE n < ? ORDER BY n",
		digits, digits, digits, digits, digits, digits), key, key, n)
	require.NoError(t, err)
	// INSERT … SELECT reserves ids in growing blocks and may leave the
	// last ones unused: a hole, which the workers would have passed
	// after GapTimeout. One more row, by a plain INSERT, ends the history.
	_, err = db.Exec("INSERT INTO room_outbox (event_id, event_key, event_type, payload, created_at) VALUES (CONCAT('hist-', ?, '-end'), ?, 'T', 'p', UTC_TIMESTAMP(6))", key, key)
	require.NoError(t, err)
	_, err = db.Exec("UPDATE room_outbox_consumers SET walked = (SELECT MAX(id) FROM room_outbox) WHERE id = 0")
	require.NoError(t, err)
}
