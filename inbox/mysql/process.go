package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
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
	return ib.core.Process(ctx, id, h)
}

// Unstamped checks, when the stamp changed no row, whether the row is
// gone or the clock has not moved since the INSERT (the server counts
// changed rows, not matched ones). (The INSERT's time is never
// committed. Until the commit no purge sees the row: Purge reads the
// records it deletes without locks, which skips transactions in
// progress.)
//
// The row is gone when the transaction it was inserted in has ended (the
// handler ran a ROLLBACK statement, or swallowed an error after which
// the server had rolled it back) and the handler's later statements ran
// outside it.
func (dialect) Unstamped(ctx context.Context, tx *sql.Tx, st sqlinbox.Statements, consumer, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, st.Contains, consumer, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return &txproc.HandlerError{Err: errors.New("the message's record is no longer in the handler's transaction: the transaction ended inside the handler, by a ROLLBACK statement or after an error the handler did not return")}
	}
	return err
}

// IsHandlerConflict reports whether a handler's error is the
// database's conflict (not, say, a timeout of a network call the handler
// made): a server error that IsTransient accepts, or a connection the
// driver found broken.
func (dialect) IsHandlerConflict(_ context.Context, _ *sql.Tx, err error) bool {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		return mysqlerr.IsTransient(err)
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysqldrv.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone)
}
