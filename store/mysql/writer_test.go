package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestWriterDoesTheCommonPath (issue 29): one call begins, lets the
// command change state and name its messages, enqueues them in the same
// transaction with IDs made and the worker's head start, commits, and
// publishes after the commit; a failing command or a refused message
// rolls everything back and publishes nothing.
func TestWriterDoesTheCommonPath(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE orders (id VARCHAR(20) PRIMARY KEY, state VARCHAR(20) NOT NULL)")
	require.NoError(t, err)
	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	require.Equal(t, testTable, w.Options().Name, "the worker takes the store's name")
	writer, err := outbox.NewWriter(s, w)
	require.NoError(t, err)

	placeOrder := func(id string, fail error, msgs ...outbox.Message) ([]outbox.Message, error) {
		return writer.Do(ctx, func(ctx context.Context, tx *sql.Tx) ([]outbox.Message, error) {
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, state) VALUES (?, 'placed')", id); err != nil {
				return nil, err
			}
			return msgs, fail
		})
	}
	sent, err := placeOrder("o-1", nil, outbox.Message{Key: "o-1", Type: "OrderPlaced"}, outbox.Message{Key: "o-1", Type: "OrderPaid"})
	require.NoError(t, err)
	require.Len(t, sent, 2)
	require.NotEmpty(t, sent[0].ID)
	require.Less(t, sent[0].ID, sent[1].ID, "made in order")
	require.Equal(t, 2, rec.Len(), "published after the commit")
	for _, m := range sent {
		r, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, outbox.StatusPublished, r.Status)
	}

	// A failing command, and a refused message: nothing written, nothing published.
	_, err = placeOrder("o-2", errors.New("out of stock"), outbox.Message{Type: "OrderPlaced"})
	require.ErrorContains(t, err, "out of stock")
	_, err = placeOrder("o-3", nil, outbox.Message{Type: ""})
	require.ErrorIs(t, err, outbox.ErrInvalidMessage)
	var n int
	require.NoError(t, d.DB.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n, "o-2 and o-3 rolled back")
	require.Equal(t, 2, rec.Len())
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Pending)

	// The two halves: the head start keeps a worker away until the writer publishes.
	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	held, err := writer.Enqueue(ctx, tx, outbox.Message{Type: "OrderShipped"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	res, err := w.ProcessBatch(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Claimed, "under the head start (%v), the worker leaves it to the writer", w.HeadStart())
	writer.Publish(ctx, held...)
	require.Equal(t, 3, rec.Len())

	_, err = outbox.NewWriter(s, mustWorker(t, newStore(t, d.Open(t))))
	require.ErrorContains(t, err, "another store")
}

// TestWriterCommitsTheCallersTransaction (issue 39): inside a
// transaction the caller began, one call enqueues, commits and publishes;
// a refused message leaves the transaction uncommitted for the caller to
// roll back; what is no transaction is refused by name. Do begins on the
// store's own database: a writer cannot be handed another.
func TestWriterCommitsTheCallersTransaction(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE orders (id VARCHAR(20) PRIMARY KEY)")
	require.NoError(t, err)
	rec := outboxtest.NewRecorder()
	w, err := outbox.NewWorker(s, rec, outbox.WorkerOptions{Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	writer, err := outbox.NewWriter(s, w)
	require.NoError(t, err)
	orders := func() (n int) {
		require.NoError(t, d.DB.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n))
		return n
	}

	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('o-1')")
	require.NoError(t, err)
	sent, err := writer.Commit(ctx, tx, outbox.Message{Key: "o-1", Type: "OrderPlaced"})
	require.NoError(t, err)
	require.Len(t, sent, 1)
	require.ErrorIs(t, tx.Rollback(), sql.ErrTxDone, "committed")
	require.Equal(t, 1, orders())
	require.Equal(t, 1, rec.Len(), "published after the commit")
	r, err := s.Get(ctx, sent[0].ID)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPublished, r.Status)

	// A refused message: not committed, the caller rolls back.
	tx, err = d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('o-2')")
	require.NoError(t, err)
	_, err = writer.Commit(ctx, tx, outbox.Message{Key: "o-2", Type: "OrderPlaced"}, outbox.Message{ID: sent[0].ID, Type: "OrderPlaced"})
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.NoError(t, tx.Rollback(), "left open for the caller")
	require.Equal(t, 1, orders())
	require.Equal(t, 1, rec.Len())

	// Not a transaction: refused, naming what it got.
	_, err = writer.Commit(ctx, d.DB, outbox.Message{Type: "OrderPlaced"})
	require.ErrorContains(t, err, "*sql.DB is no transaction")
	_, err = writer.Enqueue(ctx, "tx", outbox.Message{Type: "OrderPlaced"})
	require.ErrorContains(t, err, "a string is not a transaction the store writes through")

	// Do begins on the store's database: it takes no other.
	var in string
	_, err = writer.Do(ctx, func(ctx context.Context, tx *sql.Tx) ([]outbox.Message, error) {
		return nil, tx.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&in)
	})
	require.NoError(t, err)
	require.Equal(t, d.Name, in)
}

func mustWorker(t *testing.T, s outbox.Store) *outbox.Worker {
	t.Helper()
	w, err := outbox.NewWorker(s, outboxtest.NewRecorder(), outbox.WorkerOptions{Logger: outboxtest.Logger(t), PollInterval: time.Second})
	require.NoError(t, err)
	return w
}
