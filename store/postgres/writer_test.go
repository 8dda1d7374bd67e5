package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestWriterOnPgx (issue 39): a service on pgx's own API writes through
// one object and one call: the Writer takes its pgx.Tx as it is,
// enqueues in it, commits it and publishes after the commit; a refused
// message leaves the transaction for the caller to roll back; Enqueue
// takes the pgx.Tx too; Do begins on the store's own database.
func TestWriterOnPgx(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, d.DSN)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newStore(t, stdlib.OpenDBFromPool(pool))
	_, err = pool.Exec(ctx, "CREATE TABLE orders (id text PRIMARY KEY)")
	require.NoError(t, err)
	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	writer, err := outbox.NewWriter(s, w)
	require.NoError(t, err)
	orders := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n))
		return n
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO orders VALUES ('o-1')")
	require.NoError(t, err)
	sent, err := writer.Commit(ctx, tx, outbox.Message{Key: "o-1", Type: "OrderPlaced"})
	require.NoError(t, err)
	require.Len(t, sent, 1)
	require.Equal(t, 1, orders(), "committed")
	require.Equal(t, 1, rec.Len(), "published after the commit")
	r, err := s.Get(ctx, sent[0].ID)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPublished, r.Status)

	// A refused message: the transaction is not committed.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "INSERT INTO orders VALUES ('o-2')")
	require.NoError(t, err)
	_, err = writer.Commit(ctx, tx, outbox.Message{ID: sent[0].ID, Type: "OrderPlaced"})
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.NoError(t, tx.Rollback(ctx), "left open for the caller")
	require.Equal(t, 1, orders())

	// The two halves, with the pgx.Tx as it is.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	held, err := writer.Enqueue(ctx, tx, outbox.Message{Key: "o-1", Type: "OrderShipped"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	writer.Publish(ctx, held...)
	require.Equal(t, 2, rec.Len())

	// A pool is no transaction.
	_, err = writer.Commit(ctx, pool, outbox.Message{Type: "OrderPlaced"})
	require.ErrorContains(t, err, "*pgxpool.Pool is no transaction")

	// Do runs the command on the store's database.
	sent, err = writer.Do(ctx, func(ctx context.Context, tx *sql.Tx) ([]outbox.Message, error) {
		_, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES ('o-3')")
		return []outbox.Message{{Key: "o-3", Type: "OrderPlaced"}}, err
	})
	require.NoError(t, err)
	require.Len(t, sent, 1)
	require.Equal(t, 2, orders())
	require.Equal(t, 3, rec.Len())
}
