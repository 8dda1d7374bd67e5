package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestProcessedAtIsStampedLast: the committed processed_at is no earlier
// than the handler's last statement, not the time the row was inserted.
func TestProcessedAtIsStampedLast(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "c")
	var first, last string
	_, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		// The handler reads the clock until it has moved on from when it
		// began (after the row's INSERT).
		if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&first); err != nil {
			return err
		}
		for last = first; last == first; {
			if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&last); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	var stamped string
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT processed_at FROM inbox WHERE consumer = 'c' AND msg_id = 'm-1'").Scan(&stamped))
	require.GreaterOrEqual(t, stamped, last, "processed_at (the handler began at %s) must be stamped after the handler's last statement", first)
}

// TestStampWhenTheClockHasNotMoved: a stamp that changes nothing (the
// clock reads what it read at the INSERT, as a coarse clock can) still
// commits the message.
func TestStampWhenTheClockHasNotMoved(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	db := d.Open(t)
	db.SetMaxOpenConns(1) // the session whose clock the handler stops
	ib := newInbox(t, db, "c")
	res, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "SET @@timestamp = 1700000000.123456"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE inbox SET processed_at = UTC_TIMESTAMP(6) WHERE consumer = 'c' AND msg_id = 'm-1'")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	_, err = db.ExecContext(ctx, "SET @@timestamp = DEFAULT")
	require.NoError(t, err)
	var stamped string
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT processed_at FROM inbox WHERE consumer = 'c' AND msg_id = 'm-1'").Scan(&stamped))
	require.Equal(t, "2023-11-14 22:13:20.123456", stamped)
}

// TestHandlerEndingTheTransactionInSQL: a handler that ends the
// transaction with a ROLLBACK statement (or swallows an error after which
// the server rolled it back) has lost the message's record: Process says
// so instead of reporting the message processed.
func TestHandlerEndingTheTransactionInSQL(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "c")
	res, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "ROLLBACK")
		return err
	})
	require.ErrorContains(t, err, "the message's record is no longer in the handler's transaction")
	require.Zero(t, res)
	ok, err := ib.Contains(ctx, "m-1")
	require.NoError(t, err)
	require.False(t, ok)
	res, err = ib.Process(ctx, "m-1", func(context.Context, *sql.Tx) error { return nil })
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
}
