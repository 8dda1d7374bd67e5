package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// Process runs h once per message id of the inbox's consumer: in one
// transaction it inserts the row (consumer, id), runs h, sets the row's
// processed_at to the database clock (the transaction's last statement:
// the retention window counts from there), and commits. An id already
// recorded returns inbox.Duplicate without running h. An error from h (or a panic, as an *inbox.PanicError) rolls back the
// row and h's writes and is returned: the message can be processed again.
//
// The row's primary key does the duplicate check. A concurrent Process of
// the same id (another goroutine, process or host) blocks on the INSERT
// until the transaction holding the row ends: it then fails with a
// duplicate key (inbox.Duplicate) if that transaction committed, and goes
// on to run h if it rolled back. A transaction rolled back by a deadlock
// (say, three redeliveries waiting on one row, or handlers locking shared
// rows in different orders), a lock wait timeout (a handler holding the
// row longer than innodb_lock_wait_timeout) or a lost connection is begun
// again, after a randomised backoff, up to Options.MaxAttempts
// transactions; h is called again in the new one. A conflict error that h
// returns counts the same, provided it is the database's (h must return
// it, not swallow it). A commit whose connection was lost is tried again
// too: the new transaction finds the row if the commit had applied, and
// returns inbox.Duplicate.
//
// When ctx is done, Process stops and returns ctx's error, wrapped.
func (ib *Inbox) Process(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	return txproc.Process(ctx, txproc.Params{
		What: "mysql inbox", Consumer: ib.consumer, MaxAttempts: ib.opts.MaxAttempts,
		Observer: ib.opts.Observer, Log: ib.log,
		Once: ib.processOnce, Transient: mysqlerr.IsTransient, Wrap: ib.wrap,
	}, id, h)
}

// processOnce is one transaction of Process.
func (ib *Inbox) processOnce(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	tx, err := ib.db.BeginTx(ctx, ib.txOpts)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, ib.sql.insert, ib.consumer, id); err != nil {
		if mysqlerr.IsDuplicateKey(err) {
			return inbox.Duplicate, nil
		}
		return 0, err
	}
	if err := txproc.Call(ctx, ib.log, id, tx, h); err != nil {
		var pe *inbox.PanicError
		if !errors.As(err, &pe) && isDatabaseConflict(err) {
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

// stamp sets the row's processed_at to the database clock, as the
// transaction's last statement before COMMIT: the retention window counts
// from the end of the handler's work, however long it took. (The INSERT's
// time is never committed. Until the commit no purge sees the row: Purge
// reads the records it deletes without locks, which skips transactions in
// progress.)
//
// The row must still be the transaction's. When it is not, the
// transaction it was inserted in has ended (the handler ran a ROLLBACK
// statement, or swallowed an error after which the server had rolled it
// back) and the handler's later statements ran outside it: committing
// would report a message processed that no record keeps.
func (ib *Inbox) stamp(ctx context.Context, tx *sql.Tx, id string) error {
	res, err := tx.ExecContext(ctx, ib.sql.stamp, ib.consumer, id)
	if errors.Is(err, sql.ErrTxDone) {
		return txproc.ErrEndedTx
	}
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return err
	}
	// No row changed: gone, or the clock has not moved since the INSERT
	// (the server counts changed rows, not matched ones).
	var one int
	err = tx.QueryRowContext(ctx, ib.sql.contains, ib.consumer, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return &txproc.HandlerError{Err: errors.New("the message's record is no longer in the handler's transaction: the transaction ended inside the handler, by a ROLLBACK statement or after an error the handler did not return")}
	}
	return err
}

// isDatabaseConflict reports whether a handler's error is the database's
// conflict (not, say, a timeout of a network call the handler made):
// a server error that IsTransient accepts, or a connection the driver
// found broken.
func isDatabaseConflict(err error) bool {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		return mysqlerr.IsTransient(err)
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysqldrv.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone)
}

// isNoTable reports the server's "table doesn't exist".
func isNoTable(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && me.Number == erNoSuchTable
}

const erNoSuchTable = 1146
