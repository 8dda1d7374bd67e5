package postgres_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/inboxtest"
	"github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// The suite's operator interfaces: Contains for Inspector, Purge for
// Purger (the retention tests).
var (
	_ inboxtest.Inspector = (*postgres.Inbox)(nil)
	_ inboxtest.Purger    = (*postgres.Inbox)(nil)
)

// testTable is not DefaultTable, so that the suite also covers another
// name.
const testTable = "activity_inbox"

func newHarness(t *testing.T) inboxtest.Harness {
	return harnessWith(t, postgres.Options{})
}

// harnessWith runs the inboxes with opts (their Table, Consumer, Observer
// and Logger are the harness's), each on a pool of its own.
func harnessWith(t *testing.T, opts postgres.Options) inboxtest.Harness {
	d := pgtest.NewDatabase(t)
	fastDeadlocks(t, d)
	return inboxtest.Harness{
		DB:    d.DB,
		Param: "$1",
		New: func(t *testing.T, consumer string, obs inbox.Observer) inbox.Inbox {
			o := opts
			o.Table, o.Consumer, o.Observer, o.Logger = testTable, consumer, obs, testLogger(t)
			ib, err := postgres.New(d.Open(t), o)
			require.NoError(t, err)
			require.NoError(t, ib.Migrate(context.Background()))
			return ib
		},
		LockWaiters: func(t *testing.T) int { return lockWaiters(t, d.DB) },
		Backdate: func(t *testing.T, consumer, id string, age time.Duration) {
			res, err := d.DB.ExecContext(context.Background(),
				"UPDATE "+testTable+" SET processed_at = clock_timestamp() - make_interval(secs => $1) WHERE consumer = $2 AND msg_id = $3",
				age.Seconds(), consumer, []byte(id))
			require.NoError(t, err)
			n, err := res.RowsAffected()
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "backdate %s %q", consumer, id)
		},
		Now: func(t *testing.T) time.Time { return dbNow(t, d.DB) },
	}
}

// fastDeadlocks has the sessions of d's database look for deadlocks after
// 50ms of waiting for a lock instead of deadlock_timeout's default second:
// the suite's handlers lock shared rows in opposite orders on purpose,
// and a hundred deadlocks found a second apart make a slow test, not a
// better one. Only a superuser may change it; for anyone else the suite
// runs at the server's setting, slower.
func fastDeadlocks(t testing.TB, d *pgtest.Database) {
	t.Helper()
	if _, err := d.DB.ExecContext(context.Background(), `ALTER DATABASE "`+d.Name+`" SET deadlock_timeout = '50ms'`); err != nil {
		t.Logf("deadlock_timeout stays at the server's setting: %v", err)
	}
}

// dbNow reads the database clock, the one retention compares with.
func dbNow(t testing.TB, db *sql.DB) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT clock_timestamp()").Scan(&now))
	return now
}

// lockWaiters counts the sessions on db's database that wait for a
// heavyweight lock: a row's transaction, a tuple, a relation.
func lockWaiters(t testing.TB, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n))
	return n
}

func TestConformance(t *testing.T) {
	inboxtest.Run(t, newHarness)
}

// TestConformanceSerializable: under SERIALIZABLE a redelivery that
// waited for the first transaction fails to serialize instead of finding
// the row, and handlers' reads and writes conflict more; Process retries
// those, and every promise holds all the same.
func TestConformanceSerializable(t *testing.T) {
	inboxtest.Run(t, func(t *testing.T) inboxtest.Harness {
		return harnessWith(t, postgres.Options{Isolation: sql.LevelSerializable})
	})
}

// testLogger routes an inbox's logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
