package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

func newInbox(t testing.TB, db *sql.DB, consumer string) *mysql.Inbox {
	t.Helper()
	ib, err := mysql.New(db, mysql.Options{Consumer: consumer})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(context.Background()))
	return ib
}

func TestProcessOnceThenDuplicate(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE effects (id VARCHAR(64) PRIMARY KEY, n INT NOT NULL)")
	require.NoError(t, err)
	ib := newInbox(t, d.DB, "activity")
	calls := 0
	h := func(ctx context.Context, tx *sql.Tx) error {
		calls++
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (id, n) VALUES ('m1', 1) ON DUPLICATE KEY UPDATE n = n + 1")
		return err
	}
	res, err := ib.Process(ctx, "m1", h)
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	res, err = ib.Process(ctx, "m1", h)
	require.NoError(t, err)
	require.Equal(t, inbox.Duplicate, res)
	require.Equal(t, 1, calls)

	boom := errors.New("boom")
	res, err = ib.Process(ctx, "m2", func(ctx context.Context, tx *sql.Tx) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Zero(t, res)
	ok, err := ib.Contains(ctx, "m2")
	require.NoError(t, err)
	require.False(t, ok)
}

// testLogger routes an inbox's logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
