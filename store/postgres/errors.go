package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxrelay/outboxrelay/internal/pgerr"
)

// Class is what kind of failure a database error is. The store
// classifies every error it sees once, here: what it retries, what it
// reports as a duplicate, and what it hints at.
type Class int

// The classes of database errors.
const (
	// ClassOther is any other error (and nil).
	ClassOther Class = iota
	// ClassDuplicate is a unique violation (SQLSTATE 23505).
	ClassDuplicate
	// ClassSerialization is a serialization failure (40001): the
	// transaction may be run again.
	ClassSerialization
	// ClassDeadlock is a detected deadlock (40P01): the transaction was
	// rolled back and may be run again.
	ClassDeadlock
	// ClassLockTimeout is a lock that could not be had in time (55P03:
	// lock_timeout, or NOWAIT).
	ClassLockTimeout
	// ClassConnection is a lost or refused connection: the server shut
	// down or terminated the session (57P01 admin_shutdown, 57P02, 57P03),
	// a connection exception (class 08), or the network failed.
	ClassConnection
	// ClassNoTable is a missing table (42P01): run Store.Migrate.
	ClassNoTable
)

// String names the class.
func (c Class) String() string {
	switch c {
	case ClassDuplicate:
		return "duplicate"
	case ClassSerialization:
		return "serialization failure"
	case ClassDeadlock:
		return "deadlock"
	case ClassLockTimeout:
		return "lock timeout"
	case ClassConnection:
		return "connection lost"
	case ClassNoTable:
		return "no such table"
	}
	return "other"
}

// Classify says what kind of failure err is.
func Classify(err error) Class { return classify(err) }

func classify(err error) Class {
	if err == nil {
		return ClassOther
	}
	switch pgerr.Classify(err) {
	case pgerr.UniqueViolation:
		return ClassDuplicate
	case pgerr.Serialization:
		return ClassSerialization
	case pgerr.Deadlock:
		return ClassDeadlock
	case pgerr.LockTimeout:
		return ClassLockTimeout
	case pgerr.Connection:
		return ClassConnection
	case pgerr.UndefinedTable:
		return ClassNoTable
	}
	if _, ok := pgerr.SQLState(err); ok || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassOther
	}
	// pgx's own: a failed connect, and an error before anything reached
	// the server.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return ClassConnection
	}
	return ClassOther
}

// retryable reports an error after which the store runs a whole
// statement or transaction again.
func retryable(err error) bool {
	switch classify(err) {
	case ClassSerialization, ClassDeadlock:
		return true
	}
	return false
}

// IsTransient reports whether err is a database failure worth retrying
// as a whole: a serialization failure, a deadlock, a lock timeout, or a
// lost connection. A service may use it to retry its own command
// transaction.
func IsTransient(err error) bool {
	// pgerr's transient failures, and the lost connections that only pgx
	// knows as such (classify).
	return pgerr.IsTransient(err) || classify(err) == ClassConnection
}

// IsDuplicateKey reports whether err is a unique violation (23505). A
// service may use it for its own tables.
func IsDuplicateKey(err error) bool { return classify(err) == ClassDuplicate }
