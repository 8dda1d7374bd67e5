package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
)

// Process runs h once per message id of the inbox's consumer: in one
// transaction it inserts the row (consumer, id), runs h, sets the row's
// processed_at to the database clock (the transaction's last statement:
// the retention window counts from there), and commits. An id already
// recorded returns inbox.Duplicate without running h. An error from h (or
// a panic, as an *inbox.PanicError) rolls back the row and h's writes and
// is returned: the message can be processed again.
//
// The row's primary key does the duplicate check. A concurrent Process of
// the same id (another goroutine, process or host) waits in its INSERT
// until the transaction holding the row ends: it then returns
// inbox.Duplicate if that transaction committed, and runs h if it rolled
// back (the database's package says how its INSERT tells, and what
// waiting costs). A transaction rolled back by a conflict (a deadlock, a
// lock timeout, a lost connection; on PostgreSQL also a serialization
// failure) is begun again, after a randomised backoff, up to
// Options.MaxAttempts transactions; h is called again in the new one. A
// conflict error that h returns counts the same, provided it is the
// database's (h must return it, not swallow it). A commit whose
// connection was lost is tried again too: the new transaction finds the
// row if the commit had applied, and returns inbox.Duplicate.
//
// When ctx is done, Process stops and returns ctx's error, wrapped.
// Process is safe for concurrent use.
//
// Beneath it is txproc's loop of transactions, each one processOnce.
func (ib *Inbox) Process(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	return txproc.Process(ctx, txproc.Params{
		What: ib.d.Name(), Consumer: ib.opts.Consumer, MaxAttempts: ib.opts.MaxAttempts,
		Observer: ib.opts.Observer, Log: ib.log,
		Once: ib.processOnce, Transient: ib.d.IsTransient, Wrap: ib.wrap,
	}, id, h)
}

// processOnce is one transaction of Process: it inserts the row, runs h,
// stamps the row and commits.
func (ib *Inbox) processOnce(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	tx, err := ib.db.BeginTx(ctx, ib.txOpts)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if recorded, err := ib.insert(ctx, tx, id); err != nil {
		return 0, err
	} else if !recorded {
		return inbox.Duplicate, nil // the deferred ROLLBACK ends a transaction that wrote nothing
	}
	if err := txproc.Call(ctx, ib.log, id, tx, h); err != nil {
		var pe *inbox.PanicError
		if !errors.As(err, &pe) && ib.d.IsHandlerConflict(ctx, tx, err) {
			return 0, &txproc.ConflictError{Err: err}
		}
		return 0, &txproc.HandlerError{Err: err}
	}
	if err := ib.stamp(ctx, tx, id); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			return 0, txproc.ErrEndedTx
		}
		return 0, err
	}
	return inbox.Processed, nil
}

// insert inserts the message's row in tx and reports whether it did;
// false when a committed transaction recorded the ID already, which the
// INSERT finds after waiting for the transaction that holds the row, if
// any: MySQL fails it with a duplicate key, PostgreSQL's ON CONFLICT DO
// NOTHING inserts no row.
func (ib *Inbox) insert(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
	n, err := sqldialect.Exec(ctx, tx, ib.sql.Insert, ib.opts.Consumer, ib.d.IDArg(id))
	if ib.d.IsDuplicateKey(err) {
		return false, nil
	}
	return n == 1, err
}

// stamp sets the row's processed_at to the database clock, as the
// transaction's last statement before COMMIT: the retention window
// counts from the end of the handler's work, however long it took.
//
// The row must still be the transaction's own. When it is not, the
// handler ended the transaction (a ROLLBACK or COMMIT statement), or a
// statement of it failed and the handler did not return the error, and
// committing would report a message processed that no record keeps, or
// whose writes are partly lost: that is the handler's failure.
func (ib *Inbox) stamp(ctx context.Context, tx *sql.Tx, id string) error {
	n, err := sqldialect.Exec(ctx, tx, ib.sql.Stamp, ib.opts.Consumer, ib.d.IDArg(id))
	switch {
	case errors.Is(err, sql.ErrTxDone):
		return txproc.ErrEndedTx
	case ib.d.IsFailedTransaction(err):
		return &txproc.HandlerError{Err: fmt.Errorf("a statement of the handler's transaction failed and the handler did not return its error: %w", err)}
	case err != nil || n == 1:
		return err
	}
	return ib.d.Unstamped(ctx, tx, ib.sql, ib.opts.Consumer, id)
}
