package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// class is what kind of failure a database error is; it decides whether
// Process and Purge begin their transaction again. Every error of the
// package is classified here, and only here.
type class int

const (
	classOther class = iota
	// classUniqueViolation: a unique constraint was violated (23505).
	// The inbox's own INSERT never raises it (ON CONFLICT DO NOTHING);
	// from a handler it is the handler's error, not retried.
	classUniqueViolation
	// classSerialization: the transaction could not be serialized
	// (40001), under REPEATABLE READ or SERIALIZABLE; running it again is
	// the cure.
	classSerialization
	// classDeadlock: the server chose the transaction as a deadlock's
	// victim (40P01) and rolled it back.
	classDeadlock
	// classLockTimeout: a lock was not granted within lock_timeout, or
	// NOWAIT refused it (55P03).
	classLockTimeout
	// classConnection: the connection broke, the server went away or
	// ended the session (class 08, 57P01-57P03, idle timeouts), or the
	// network failed; a COMMIT may or may not have been applied.
	classConnection
	// classUndefinedTable: the table does not exist (42P01): Migrate was
	// not run.
	classUndefinedTable
	// classFailedTransaction: a statement in a transaction that an
	// earlier error aborted (25P02): someone swallowed that error.
	classFailedTransaction
)

func (c class) String() string {
	switch c {
	case classUniqueViolation:
		return "unique violation"
	case classSerialization:
		return "serialization failure"
	case classDeadlock:
		return "deadlock"
	case classLockTimeout:
		return "lock timeout"
	case classConnection:
		return "connection lost"
	case classUndefinedTable:
		return "table missing"
	case classFailedTransaction:
		return "transaction aborted"
	}
	return "other"
}

// sqlState returns the SQLSTATE of a server error, through the SQLState
// method that pgx's *pgconn.PgError and lib/pq's *pq.Error both have.
func sqlState(err error) (string, bool) {
	var se interface{ SQLState() string }
	if err == nil || !errors.As(err, &se) {
		return "", false
	}
	return se.SQLState(), true
}

// classify says what kind of failure err is: a server error by its
// SQLSTATE, a broken connection by database/sql's, net's and syscall's
// errors. A cancelled or expired context is classOther, whatever the
// driver wrapped around it.
func classify(err error) class {
	if err == nil {
		return classOther
	}
	if code, ok := sqlState(err); ok {
		return classifyState(code)
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return classOther
	case errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr):
		return classConnection
	}
	return classOther
}

// classifyState classifies a SQLSTATE.
func classifyState(code string) class {
	switch code {
	case "23505": // unique_violation
		return classUniqueViolation
	case "40001": // serialization_failure
		return classSerialization
	case "40P01": // deadlock_detected
		return classDeadlock
	case "55P03": // lock_not_available
		return classLockTimeout
	case "42P01": // undefined_table
		return classUndefinedTable
	case "25P02": // in_failed_sql_transaction
		return classFailedTransaction
	case "57P01", // admin_shutdown (pg_terminate_backend, a fast shutdown)
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now (starting up, shutting down)
		"25P03", // idle_in_transaction_session_timeout
		"57P05", // idle_session_timeout
		"40003": // statement_completion_unknown
		return classConnection
	}
	if strings.HasPrefix(code, "08") { // connection_exception
		return classConnection
	}
	return classOther
}

// isTransient reports whether err is a failure worth beginning the
// transaction again for: the server rolled it back (deadlock,
// serialization failure, lock timeout) or the connection was lost.
func isTransient(err error) bool {
	switch classify(err) {
	case classSerialization, classDeadlock, classLockTimeout, classConnection:
		return true
	}
	return false
}
