// Package pgerr classifies PostgreSQL errors, once, for store/postgres
// and inbox/postgres: a server error by its SQLSTATE (through the
// SQLState method that pgx's *pgconn.PgError and lib/pq's *pq.Error both
// have, so that it imports no driver), a broken connection by
// database/sql's, net's and syscall's errors.
package pgerr

import (
	"errors"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/connlost"
)

// Class is what kind of failure a database error is.
type Class int

// The classes.
const (
	// Other is any other error (and nil).
	Other Class = iota
	// UniqueViolation: a unique constraint was violated (23505).
	UniqueViolation
	// Serialization: the transaction could not be serialized
	// (40001), under REPEATABLE READ or SERIALIZABLE; running it again is
	// the cure.
	Serialization
	// Deadlock: the server chose the transaction as a deadlock's
	// victim (40P01) and rolled it back.
	Deadlock
	// LockTimeout: a lock was not granted within lock_timeout, or
	// NOWAIT refused it (55P03).
	LockTimeout
	// Connection: the connection broke, the server went away or
	// ended the session (class 08, 57P01-57P03, idle timeouts), or the
	// network failed; a COMMIT may or may not have been applied.
	Connection
	// UndefinedTable: the table does not exist (42P01): Migrate was
	// not run.
	UndefinedTable
	// FailedTransaction: a statement in a transaction that an
	// earlier error aborted (25P02): someone swallowed that error.
	FailedTransaction
)

func (c Class) String() string {
	switch c {
	case UniqueViolation:
		return "unique violation"
	case Serialization:
		return "serialization failure"
	case Deadlock:
		return "deadlock"
	case LockTimeout:
		return "lock timeout"
	case Connection:
		return "connection lost"
	case UndefinedTable:
		return "table missing"
	case FailedTransaction:
		return "transaction aborted"
	}
	return "other"
}

// SQLState returns the SQLSTATE of a server error, through the SQLState
// method that pgx's *pgconn.PgError and lib/pq's *pq.Error both have.
func SQLState(err error) (string, bool) {
	var se interface{ SQLState() string }
	if err == nil || !errors.As(err, &se) {
		return "", false
	}
	return se.SQLState(), true
}

// Classify says what kind of failure err is: a server error by its
// SQLSTATE, a broken connection by database/sql's, net's and syscall's
// errors. A cancelled or expired context is Other, whatever the
// driver wrapped around it.
func Classify(err error) Class {
	if err == nil {
		return Other
	}
	if code, ok := SQLState(err); ok {
		return classifyState(code)
	}
	if connlost.Is(err) {
		return Connection
	}
	return Other
}

// sqlStates classifies the SQLSTATEs that are not Other, but for the
// rest of class 08 (connection_exception), which classifyState adds.
var sqlStates = map[string]Class{
	"23505": UniqueViolation,   // unique_violation
	"40001": Serialization,     // serialization_failure
	"40P01": Deadlock,          // deadlock_detected
	"55P03": LockTimeout,       // lock_not_available
	"42P01": UndefinedTable,    // undefined_table
	"25P02": FailedTransaction, // in_failed_sql_transaction
	"57P01": Connection,        // admin_shutdown (pg_terminate_backend, a fast shutdown)
	"57P02": Connection,        // crash_shutdown
	"57P03": Connection,        // cannot_connect_now (starting up, shutting down)
	"25P03": Connection,        // idle_in_transaction_session_timeout
	"57P05": Connection,        // idle_session_timeout
	"40003": Connection,        // statement_completion_unknown
}

// classifyState classifies a SQLSTATE.
func classifyState(code string) Class {
	if c, ok := sqlStates[code]; ok {
		return c
	}
	if strings.HasPrefix(code, "08") { // connection_exception
		return Connection
	}
	return Other
}

// IsTransient reports whether err is a failure worth beginning the
// transaction again for: the server rolled it back (deadlock,
// serialization failure, lock timeout) or the connection was lost.
func IsTransient(err error) bool {
	switch Classify(err) {
	case Serialization, Deadlock, LockTimeout, Connection:
		return true
	}
	return false
}
