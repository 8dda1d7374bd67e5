package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/inboxtest"
	"github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// testTable is not DefaultTable, so that the suite also covers another
// name.
const testTable = "activity_inbox"

func newHarness(t *testing.T) inboxtest.Harness {
	return harnessWith(t, mysql.Options{})
}

// harnessWith runs the inboxes with opts (their Table, Consumer, Observer
// and Logger are the harness's).
func harnessWith(t *testing.T, opts mysql.Options) inboxtest.Harness {
	d := testutil.NewDatabase(t)
	return inboxtest.Harness{
		DB: d.DB,
		New: func(t *testing.T, consumer string, obs inbox.Observer) inbox.Inbox {
			o := opts
			o.Table, o.Consumer, o.Observer, o.Logger = testTable, consumer, obs, testLogger(t)
			ib, err := mysql.New(d.Open(t), o)
			require.NoError(t, err)
			require.NoError(t, ib.Migrate(context.Background()))
			return ib
		},
		LockWaiters: func(t *testing.T) int { return lockWaiters(t, d.DB, d.Name) },
		Backdate: func(t *testing.T, consumer, id string, age time.Duration) {
			res, err := d.DB.ExecContext(context.Background(),
				"UPDATE "+testTable+" SET processed_at = UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND WHERE consumer = ? AND msg_id = ?",
				age.Microseconds(), consumer, id)
			require.NoError(t, err)
			n, err := res.RowsAffected()
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "backdate %s %q", consumer, id)
		},
		Now: func(t *testing.T) time.Time { return dbNow(t, d.DB) },
	}
}

// dbNow reads the database's UTC clock, the one retention compares with.
func dbNow(t testing.TB, db *sql.DB) time.Time {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT UTC_TIMESTAMP(6)").Scan(&s))
	now, err := time.Parse("2006-01-02 15:04:05.999999", s)
	require.NoError(t, err)
	return now
}

func TestConformance(t *testing.T) {
	inboxtest.Run(t, newHarness)
}

// TestConformanceRepeatableRead: under REPEATABLE READ the duplicate
// check also locks gaps, so inserts of neighbouring IDs conflict more;
// every promise holds all the same.
func TestConformanceRepeatableRead(t *testing.T) {
	inboxtest.Run(t, func(t *testing.T) inboxtest.Harness {
		return harnessWith(t, mysql.Options{Isolation: sql.LevelRepeatableRead})
	})
}

// lockWaiters counts the transactions on database dbName that wait for a
// lock (see testutil.LockWaits).
func lockWaiters(t *testing.T, db *sql.DB, dbName string) int {
	n, err := testutil.LockWaits(context.Background(), db, dbName)
	require.NoError(t, err)
	return n
}
