package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// TestNoGoroutineLeft: every path of Process and Purge (processed,
// duplicate, handler error, panic, retried conflicts, cancellation) and
// Migrate leaves no goroutine behind once the pool is closed. The inbox
// starts none itself; this guards against one that would.
func TestNoGoroutineLeft(t *testing.T) {
	d := pgtest.NewDatabase(t)
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	db := d.Open(t)
	ib := newInbox(t, db, "c")
	noop := func(context.Context, *sql.Tx) error { return nil }
	_, err := ib.Process(ctx, "m-1", noop)
	require.NoError(t, err)
	_, err = ib.Process(ctx, "m-1", noop)
	require.NoError(t, err)
	_, err = ib.Process(ctx, "m-2", func(context.Context, *sql.Tx) error { return errors.New("boom") })
	require.Error(t, err)
	_, err = ib.Process(ctx, "m-3", func(context.Context, *sql.Tx) error { panic("boom") })
	require.Error(t, err)
	calls := 0
	_, err = ib.Process(ctx, "m-4", func(context.Context, *sql.Tx) error {
		if calls++; calls < 3 {
			return &pgconn.PgError{Code: "40001"}
		}
		return nil
	})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	_, err = ib.Process(cctx, "m-5", func(ctx context.Context, tx *sql.Tx) error {
		cancel()
		_, err := tx.ExecContext(ctx, "SELECT pg_sleep(10)")
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	_, err = ib.Purge(ctx, time.Hour, 10)
	require.NoError(t, err)
	require.True(t, contains(t, ib, "m-4"))
	require.False(t, contains(t, ib, "m-5"))
	require.Equal(t, inbox.Processed.String(), "processed")

	require.NoError(t, db.Close())
	goleak.VerifyNone(t, before)
}
