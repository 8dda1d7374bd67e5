package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Writer is the writer's side of an outbox in one object: it holds the
// store and the worker, and does the common path of a command in one call
// (Do): begin a transaction, let the caller change state and say which
// messages announce it, enqueue them in the same transaction (IDs filled
// in, the head start the worker's timeouts need), commit, and publish
// them right after the commit. Enqueue and Publish are the two halves, for
// a caller that runs its own transactions. Store.Enqueue and
// Worker.PublishNow stay for those who need them.
//
// A Writer is safe for concurrent use.
type Writer struct {
	store     Store
	worker    *Worker
	headStart time.Duration
}

// NewWriter returns the Writer of store, publishing after commit with
// worker, which must deliver from the same store (it need not be
// running: PublishNow works either way, and a running worker delivers
// what the after-commit publish could not). A nil worker means no
// after-commit publish: messages are enqueued due at once, for a worker
// elsewhere.
func NewWriter(store Store, worker *Worker) (*Writer, error) {
	if store == nil {
		return nil, errors.New("outbox: NewWriter: store is nil")
	}
	w := &Writer{store: store, worker: worker}
	if worker != nil {
		if worker.store != store {
			return nil, errors.New("outbox: NewWriter: the worker delivers from another store")
		}
		w.headStart = worker.HeadStart()
	}
	return w, nil
}

// Do runs a command: it begins a transaction on db, calls fn with it, and
// enqueues the messages fn returns in the same transaction (an empty ID
// becomes NewID()), then commits and publishes them after the commit. If
// fn fails, or a message is refused (ErrInvalidMessage, ErrDuplicateID),
// the transaction is rolled back, nothing is published, and Do returns
// that error. A failed after-commit publish is not an error: the command
// is done, the messages are stored, and a worker delivers them (the
// worker has logged what went wrong). Do returns the messages as they
// were enqueued.
//
// db must be the database of the store, and fn must not commit or roll
// back tx.
func (w *Writer) Do(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) ([]Message, error)) ([]Message, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("outbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	msgs, err := fn(ctx, tx)
	if err != nil {
		return nil, err
	}
	msgs, err = w.Enqueue(ctx, tx, msgs...)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("outbox: commit: %w", err)
	}
	w.Publish(ctx, msgs...)
	return msgs, nil
}

// Enqueue enqueues msgs through tx, the caller's transaction, with the
// head start that lets Publish deliver them after the commit without
// racing the worker, and returns them with every empty ID filled in. Call
// Publish with the result once tx has committed.
func (w *Writer) Enqueue(ctx context.Context, tx Execer, msgs ...Message) ([]Message, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			m.ID = NewID()
		}
		out[i] = m
	}
	if err := w.store.Enqueue(ctx, tx, &EnqueueOptions{HeadStart: w.headStart}, out...); err != nil {
		return nil, err
	}
	return out, nil
}

// Publish is the after-commit publish of msgs (Worker.PublishNow), for
// a caller that committed the transaction Enqueue wrote them in. It never
// fails the command: what it cannot publish, a worker delivers, and the
// worker logs why. Without a worker it does nothing. It costs the caller
// what PublishNow does: each sink call at most the worker's
// AfterCommitTimeout, one message after another (up to Concurrency at
// once), and each store call at most StoreTimeout; while the worker holds
// off a failing sink, no sink call but a probe now and then. A cancelled
// ctx does not cut it short: the commit has happened, and the publish is
// bounded anyway.
func (w *Writer) Publish(ctx context.Context, msgs ...Message) {
	if w.worker == nil || len(msgs) == 0 {
		return
	}
	_ = w.worker.PublishNow(context.WithoutCancel(ctx), msgs...) // logged by the worker; the worker delivers what it left
}
