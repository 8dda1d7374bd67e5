package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Writer is the writer's side of an outbox in one object: it holds the
// store and the worker, and writes a command's messages in one call, with
// the head start the worker's timeouts need and the publish right after
// the commit:
//
//   - Do runs the whole command in a transaction of its own, begun on the
//     store's database;
//   - Commit finishes a transaction the caller began (a *sql.Tx, or a
//     pgx.Tx on the PostgreSQL store): it enqueues the messages in it,
//     commits it and publishes them.
//
// Enqueue and Publish are Commit's two halves, for a caller that commits
// by itself (a framework's transaction, say). Store.Enqueue and
// Worker.PublishNow are the level below, for those who need it.
//
// A Writer is safe for concurrent use.
type Writer struct {
	store     Store
	worker    *Worker
	tx        backend.Transactor // nil: the store begins no transactions
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
	w := &Writer{store: store, worker: worker, tx: backend.CapabilitiesOf(store).Transactions}
	if worker != nil {
		if worker.store != store {
			return nil, errors.New("outbox: NewWriter: the worker delivers from another store")
		}
		w.headStart = worker.HeadStart()
	}
	return w, nil
}

// Do runs a command: it begins a transaction on the store's database,
// calls fn with it, and enqueues the messages fn returns in the same
// transaction (an empty ID becomes NewID()), then commits and publishes
// them after the commit. If fn fails, or a message is refused
// (ErrInvalidMessage, ErrDuplicateID), the transaction is rolled back,
// nothing is published, and Do returns that error. A failed after-commit
// publish is not an error: the command is done, the messages are stored,
// and a worker delivers them (the worker has logged what went wrong). Do
// returns the messages as they were enqueued.
//
// fn must not commit or roll back tx. A store that begins no
// transactions (backend.Capabilities.Transactions; store/mysql and
// store/postgres do) makes Do fail: begin one yourself and call Commit.
func (w *Writer) Do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) ([]Message, error)) ([]Message, error) {
	if w.tx == nil {
		return nil, errors.New("outbox: Do: the store begins no transactions of its own; begin one and call Commit")
	}
	tx, err := w.tx.BeginTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	msgs, err := fn(ctx, tx)
	if err != nil {
		return nil, err
	}
	return w.Commit(ctx, tx, msgs...)
}

// Commit ends a command the caller ran in tx, a transaction it began (a
// *sql.Tx, or a transaction of a kind the store takes: a pgx.Tx on
// store/postgres): it enqueues msgs in tx (an empty ID becomes NewID()),
// commits tx, and publishes them after the commit. It returns the
// messages as they were enqueued.
//
// If a message is refused (ErrInvalidMessage, ErrDuplicateID), or tx is
// of a kind the store does not take, Commit returns that error and
// leaves tx as it is, not committed, for the caller to roll back (its
// deferred Rollback does). If the commit fails, nothing is published
// (whether the commit landed is unknown: if it did, a worker delivers
// the messages). A failed after-commit publish is not an error, as for
// Do.
func (w *Writer) Commit(ctx context.Context, tx any, msgs ...Message) ([]Message, error) {
	var commit func() error
	switch c := tx.(type) {
	case interface{ Commit() error }: // *sql.Tx
		commit = c.Commit
	case interface{ Commit(context.Context) error }: // pgx.Tx
		commit = func() error { return c.Commit(ctx) }
	default:
		return nil, fmt.Errorf("outbox: Commit: a %T is no transaction (it has no Commit method)", tx)
	}
	out, err := w.Enqueue(ctx, tx, msgs...)
	if err != nil {
		return nil, err
	}
	if err := commit(); err != nil {
		return nil, fmt.Errorf("outbox: commit: %w", err)
	}
	w.Publish(ctx, out...)
	return out, nil
}

// Enqueue enqueues msgs through tx, the caller's transaction (an Execer
// such as *sql.Tx, or a transaction of a kind the store takes: a pgx.Tx
// on store/postgres), with the head start that lets Publish deliver them
// after the commit without racing the worker, and returns them with
// every empty ID filled in. Call Publish with the result once tx has
// committed.
func (w *Writer) Enqueue(ctx context.Context, tx any, msgs ...Message) ([]Message, error) {
	e, err := w.execer(tx)
	if err != nil {
		return nil, err
	}
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
	if err := w.store.Enqueue(ctx, e, &EnqueueOptions{HeadStart: w.headStart}, out...); err != nil {
		return nil, err
	}
	return out, nil
}

// execer is what the store's Enqueue writes through for tx.
func (w *Writer) execer(tx any) (Execer, error) {
	if e, ok := tx.(Execer); ok {
		return e, nil
	}
	if w.tx != nil && tx != nil {
		if e, ok := w.tx.ExecerOf(tx); ok {
			return e, nil
		}
	}
	return nil, fmt.Errorf("outbox: a %T is not a transaction the store writes through (a *sql.Tx is)", tx)
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
