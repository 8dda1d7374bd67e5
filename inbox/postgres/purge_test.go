package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// insertRecords inserts n records of consumer, evt-00000 processed age
// ago and each next one apart older, in one statement.
func insertRecords(t testing.TB, db *sql.DB, consumer string, n int, age, apart time.Duration) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), `INSERT INTO inbox (consumer, msg_id, processed_at)
		SELECT $1, convert_to('evt-' || lpad(g::text, 5, '0'), 'UTF8'), clock_timestamp() - make_interval(secs => $2 + g * $3)
		  FROM generate_series(0, $4 - 1) AS g`, consumer, age.Seconds(), apart.Seconds(), n)
	require.NoError(t, err)
}

func TestPurgeArguments(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ib := newInbox(t, d.DB, "c")
	for _, tc := range []struct {
		age   time.Duration
		batch int
	}{{0, 10}, {-time.Hour, 10}, {time.Hour, 0}, {time.Hour, -1}, {time.Hour, 10001}} {
		_, err := ib.Purge(context.Background(), tc.age, tc.batch)
		require.ErrorContains(t, err, "postgres inbox: purge: older than", "%v %d", tc.age, tc.batch)
	}
}

// TestPurgeNeverWaits: while another transaction holds one old record
// (FOR UPDATE), Purge deletes the others without waiting for it, and new
// messages are processed meanwhile; the held record goes at the next
// purge after it is released.
func TestPurgeNeverWaits(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "activity")
	insertRecords(t, d.DB, "activity", 10, 2*time.Hour, 0)

	holder, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback() }()
	var one int
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT 1 FROM inbox WHERE consumer = 'activity' AND msg_id = 'evt-00004' FOR UPDATE").Scan(&one))

	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := ib.Purge(pctx, time.Hour, 3)
	require.NoError(t, err, "a purge waited for a held record")
	require.Equal(t, 9, n)
	for _, id := range []string{"evt-00004a", "evt-1"} {
		res, err := ib.Process(pctx, id, func(context.Context, *sql.Tx) error { return nil })
		require.NoError(t, err)
		require.Equal(t, inbox.Processed, res)
	}
	require.True(t, contains(t, ib, "evt-00004"))
	require.NoError(t, holder.Rollback())
	n, err = ib.Purge(pctx, time.Hour, 3)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.False(t, contains(t, ib, "evt-00004"))
}

// TestConcurrentPurges: purges running at once on four instances, while
// messages are processed, delete every old record once between them and
// fail none.
func TestConcurrentPurges(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "activity")
	insertRecords(t, d.DB, "activity", 3000, 2*time.Hour, 0)
	const purges = 4
	type result struct {
		n   int
		err error
	}
	results := make(chan result, purges)
	processed := make(chan error, 1)
	start := make(chan struct{})
	for range purges {
		other := newInbox(t, d.Open(t), "activity") // another instance
		go func() {
			<-start
			n, err := other.Purge(ctx, time.Hour, 100)
			results <- result{n, err}
		}()
	}
	go func() {
		<-start
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			_, err = ib.Process(ctx, fmt.Sprintf("evt-%05d-new", i), func(context.Context, *sql.Tx) error { return nil })
		}
		processed <- err
	}()
	close(start)
	total := 0
	for range purges {
		r := <-results
		require.NoError(t, r.err)
		total += r.n
	}
	require.NoError(t, <-processed)
	require.Equal(t, 3000, total, "every old record deleted once")
	// A purge that met another's locked rows stopped early and left them
	// to their owner, which deleted them: nothing is left over.
	n, err := ib.Purge(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.Zero(t, n)
	var left int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT count(*) FROM inbox").Scan(&left))
	require.Equal(t, 200, left, "the new messages' records stay")
}
