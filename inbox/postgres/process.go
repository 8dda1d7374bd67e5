package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/safetext"
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
	if err := inbox.ValidateID(id); err != nil {
		return 0, fmt.Errorf("postgres inbox: process: %w", err)
	}
	if h == nil {
		return 0, errors.New("postgres inbox: process: the handler is nil")
	}
	start := time.Now()
	res, attempts, err := ib.processRetrying(ctx, id, h)
	e := inbox.Event{Consumer: ib.consumer, ID: id, Duration: time.Since(start), Attempts: attempts}
	var herr *handlerError
	switch {
	case errors.As(err, &herr):
		e.Kind, e.Err = inbox.EventHandlerFailed, herr.err
		err = fmt.Errorf("postgres inbox: process %q: handler: %w", id, herr.err)
	case err != nil:
		e.Kind, e.Err = inbox.EventFailed, err
		err = ib.wrap(fmt.Sprintf("process %q", id), err)
	case res == inbox.Duplicate:
		e.Kind = inbox.EventDuplicate
	default:
		e.Kind = inbox.EventProcessed
	}
	ib.observe(ctx, e)
	return res, err
}

// handlerError is a failure of the handler that Process returns as it
// is (not a conflict to retry).
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// conflictError is a conflict the handler returned: retried like one of
// the inbox's own statements.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return "handler: " + e.err.Error() }
func (e *conflictError) Unwrap() error { return e.err }

// processRetrying runs processOnce until it ends other than in a
// conflict, at most MaxAttempts times. It returns how many transactions
// it began.
func (ib *Inbox) processRetrying(ctx context.Context, id string, h inbox.Handler) (inbox.Result, int, error) {
	policy := newBackoff()
	for attempt := 1; ; attempt++ {
		res, err := ib.processOnce(ctx, id, h)
		if err == nil || !isConflict(err) {
			return res, attempt, err
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, attempt, fmt.Errorf("%w (after: %v)", cerr, err)
		}
		if attempt >= ib.opts.MaxAttempts {
			return 0, attempt, fmt.Errorf("gave up after %d transactions: %w", attempt, err)
		}
		ib.observe(ctx, inbox.Event{Kind: inbox.EventConflict, Consumer: ib.consumer, ID: id, Attempts: attempt, Err: err})
		ib.log.DebugContext(ctx, "inbox transaction rolled back by a conflict; trying again",
			slog.String("event_id", id), slog.Int("attempt", attempt), slog.String("error", err.Error()))
		if werr := pause(ctx, policy); werr != nil {
			return 0, attempt, fmt.Errorf("%w (after a conflict: %v)", werr, err)
		}
	}
}

// newBackoff returns the backoff between the tries of a transaction
// that conflicted: randomised (by half), from 10ms doubling up to 1s.
func newBackoff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

// pause waits for policy's next backoff, or until ctx is done.
func pause(ctx context.Context, policy backoff.BackOff) error {
	timer := time.NewTimer(policy.NextBackOff())
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// processOnce is one transaction of Process.
func (ib *Inbox) processOnce(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	tx, err := ib.db.BeginTx(ctx, ib.txOpts)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, ib.sql.insert, ib.consumer, []byte(id))
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, err
	} else if n == 0 {
		return inbox.Duplicate, nil // the deferred ROLLBACK ends a transaction that wrote nothing
	}
	if err := ib.call(ctx, id, tx, h); err != nil {
		var pe *inbox.PanicError
		if !errors.As(err, &pe) && isDatabaseConflict(ctx, tx, err) {
			return 0, &conflictError{err: err}
		}
		return 0, &handlerError{err: err}
	}
	if err := ib.stamp(ctx, tx, id); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			return 0, errEndedTx
		}
		return 0, err
	}
	return inbox.Processed, nil
}

// stamp sets the row's processed_at to the database clock, as the
// transaction's last statement before COMMIT: the retention window counts
// from the end of the handler's work, however long it took. (Until the
// commit no purge sees the row: PostgreSQL shows no transaction another's
// uncommitted rows.)
//
// The row must still be the transaction's own (its xmin the
// transaction's ID). When it is not, the transaction it was inserted in
// has ended inside the handler (a ROLLBACK or COMMIT statement) and the
// handler's later statements ran outside it; when a statement failed and
// the handler swallowed the error, PostgreSQL refuses every statement
// until the rollback (in_failed_sql_transaction). Either way, committing
// would report a message processed that no record keeps, or whose writes
// are partly lost.
func (ib *Inbox) stamp(ctx context.Context, tx *sql.Tx, id string) error {
	res, err := tx.ExecContext(ctx, ib.sql.stamp, ib.consumer, []byte(id))
	switch {
	case errors.Is(err, sql.ErrTxDone):
		return errEndedTx
	case classify(err) == classFailedTransaction:
		return &handlerError{err: fmt.Errorf("a statement of the handler's transaction failed and the handler did not return its error: %w", err)}
	case err != nil:
		return err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return err
	}
	return &handlerError{err: errors.New("the message's record is no longer in the handler's transaction: the transaction ended inside the handler, by a ROLLBACK or COMMIT statement")}
}

// errEndedTx is the failure of a handler that ended its transaction
// through database/sql.
var errEndedTx error = &handlerError{err: errors.New("the handler ended the transaction itself (Commit or Rollback): it must leave that to the inbox")}

// call runs h, turning a panic into an *inbox.PanicError.
func (ib *Inbox) call(ctx context.Context, id string, tx *sql.Tx, h inbox.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			err = &inbox.PanicError{Value: r, Stack: stack}
			ib.log.ErrorContext(ctx, "inbox handler panicked; rolled back",
				slog.String("event_id", id), slog.String("panic", safetext.Truncate(fmt.Sprint(r), maxPanicBytes)),
				slog.String("stack", safetext.Truncate(string(stack), 4096)))
		}
	}()
	return h(ctx, tx)
}

// isConflict reports whether err, from one transaction of Process, is
// worth a fresh transaction: the server rolled it back (a deadlock, a
// serialization failure, a lock timeout), or the connection was lost.
func isConflict(err error) bool {
	var ce *conflictError
	if errors.As(err, &ce) {
		return true
	}
	var he *handlerError
	if errors.As(err, &he) {
		return false
	}
	return isTransient(err)
}

// isDatabaseConflict reports whether a handler's error is the database's
// conflict (not, say, a timeout of a network call the handler made): a
// server error with a transient SQLSTATE, a connection database/sql or
// the driver found broken, or a network error when the transaction's own
// connection turns out to be gone as well.
func isDatabaseConflict(ctx context.Context, tx *sql.Tx, err error) bool {
	if _, ok := sqlState(err); ok {
		return isTransient(err)
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	if classify(err) != classConnection {
		return false
	}
	_, perr := tx.ExecContext(ctx, "SELECT 1")
	return perr != nil && classify(perr) == classConnection
}

// observe hands an event to the Observer, if there is one.
func (ib *Inbox) observe(ctx context.Context, e inbox.Event) {
	if ib.opts.Observer != nil {
		ib.opts.Observer.Observe(ctx, e)
	}
}

// maxPanicBytes bounds a handler's panic value in a log line.
const maxPanicBytes = 512
