package mysql_test

import (
	"context"
	"database/sql"
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
// whole unkeyed history once a second.)
func TestOrderedClaimsReadNoHistory(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	newStore(t, d.DB)
	const history = 20_000
	fillPublished(t, d.DB, "K", history)
	fillPublished(t, d.DB, "", history)
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
