package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
	"github.com/outboxrelay/outboxrelay/internal/pgerr"
)

// Process runs h once per message id of the inbox's consumer: in one
// transaction it inserts the row (consumer, id), runs h, sets the row's
// processed_at to the database clock (the transaction's last statement:
// the retention window counts from there), and commits. An id already
// recorded returns inbox.Duplicate without running h. An error from h (or
// a panic, as an *inbox.PanicError) rolls back the row and h's writes and
// is returned: the message can be processed again.
//
// The row's primary key does the duplicate check: INSERT … ON CONFLICT
// DO NOTHING. A concurrent Process of the same id (another goroutine,
// process or host) waits in its INSERT until the transaction holding the
// row ends: it then inserts nothing (inbox.Duplicate) if that transaction
// committed, and inserts the row and runs h if it rolled back. Waiting
// redeliveries never deadlock each other, and no unique violation is
// raised. A transaction rolled back by a deadlock (handlers locking
// shared rows in different orders), a serialization failure (under
// REPEATABLE READ or SERIALIZABLE), a lock timeout (lock_timeout) or a
// lost connection is begun again, after a randomised backoff, up to
// Options.MaxAttempts transactions; h is called again in the new one. A
// conflict error that h returns counts the same, provided it is the
// database's (h must return it, not swallow it). A commit whose
// connection was lost is tried again too: the new transaction finds the
// row if the commit had applied, and returns inbox.Duplicate.
//
// When ctx is done, Process stops and returns ctx's error, wrapped.
func (ib *Inbox) Process(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	return ib.core.Process(ctx, id, h)
}

// Unstamped: the stamp changes the row only while it is the
// transaction's own (its xmin the transaction's ID). When it is not, the
// transaction it was inserted in has ended inside the handler (a
// ROLLBACK or COMMIT statement) and the handler's later statements ran
// outside it. (Until the commit no purge sees the row: PostgreSQL shows
// no transaction another's uncommitted rows.)
func (dialect) Unstamped(context.Context, *sql.Tx, sqlinbox.Statements, string, string) error {
	return &txproc.HandlerError{Err: errors.New("the message's record is no longer in the handler's transaction: the transaction ended inside the handler, by a ROLLBACK or COMMIT statement")}
}

// IsHandlerConflict reports whether a handler's error is the database's
// conflict (not, say, a timeout of a network call the handler made): a
// server error with a transient SQLSTATE, a connection database/sql or
// the driver found broken, or a network error when the transaction's own
// connection turns out to be gone as well.
func (dialect) IsHandlerConflict(ctx context.Context, tx *sql.Tx, err error) bool {
	if _, ok := pgerr.SQLState(err); ok {
		return pgerr.IsTransient(err)
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	if pgerr.Classify(err) != pgerr.Connection {
		return false
	}
	_, perr := tx.ExecContext(ctx, "SELECT 1")
	return perr != nil && pgerr.Classify(perr) == pgerr.Connection
}
