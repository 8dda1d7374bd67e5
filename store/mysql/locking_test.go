package mysql

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// A claim must never make a writer wait: the business transaction that
// enqueues an event would otherwise be slowed by every worker poll.
func TestClaimDoesNotBlockWriters(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := New(d.DB, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: id, Type: "T"}))
	}

	// Hold a claim's transaction open after its locking read.
	tx, err := d.DB.BeginTx(ctx, readCommitted)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	rows, err := claimDueSQL(s.t, 100).query(ctx, tx)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, n)

	// A writer appends new due events meanwhile, in its own transaction.
	// Were it to wait for the claim's locks, the server would fail it
	// after its lock wait timeout (1s here): the test does not time the
	// writer, whose speed depends on the machine.
	wtx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = wtx.Rollback() }()
	_, err = wtx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1")
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, wtx, nil, outbox.Message{ID: "new", Type: "T"}),
		"Enqueue waited for an open claim (gap lock)")
	require.NoError(t, wtx.Commit())
}
