package sqlinbox

import (
	"context"
	"database/sql"
	"errors"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
)

// Process is inbox.Inbox's Process: txproc's loop of transactions, each
// one processOnce.
func (ib *Inbox) Process(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	return txproc.Process(ctx, txproc.Params{
		What: ib.d.Name(), Consumer: ib.opts.Consumer, MaxAttempts: ib.opts.MaxAttempts,
		Observer: ib.opts.Observer, Log: ib.log,
		Once: ib.processOnce, Transient: ib.d.IsTransient, Wrap: ib.Wrap,
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
	if err := ib.d.Stamp(ctx, tx, ib.sql, ib.opts.Consumer, id); err != nil {
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
	res, err := tx.ExecContext(ctx, ib.sql.Insert, ib.opts.Consumer, ib.d.IDArg(id))
	if err != nil {
		if ib.d.IsDuplicateKey(err) {
			return false, nil
		}
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
