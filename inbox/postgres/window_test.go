package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// TestProcessedAtIsStampedLast: the committed processed_at is no earlier
// than the handler's last statement, not the time the row was inserted.
func TestProcessedAtIsStampedLast(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "c")
	var first, last time.Time
	_, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
		// The handler reads the clock until it has moved on from when it
		// began (after the row's INSERT).
		if err := tx.QueryRowContext(ctx, "SELECT clock_timestamp()").Scan(&first); err != nil {
			return err
		}
		for last = first; !last.After(first); {
			if err := tx.QueryRowContext(ctx, "SELECT clock_timestamp()").Scan(&last); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	var stamped time.Time
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT processed_at FROM inbox WHERE consumer = 'c' AND msg_id = 'm-1'").Scan(&stamped))
	require.False(t, stamped.Before(last), "processed_at %v (the handler began at %v) must be stamped after the handler's last statement %v", stamped, first, last)
}
