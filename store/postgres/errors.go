package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
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
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505":
			return ClassDuplicate
		case pe.Code == "40001":
			return ClassSerialization
		case pe.Code == "40P01":
			return ClassDeadlock
		case pe.Code == "55P03":
			return ClassLockTimeout
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", strings.HasPrefix(pe.Code, "08"):
			return ClassConnection
		case pe.Code == "42P01":
			return ClassNoTable
		}
		return ClassOther
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassOther
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) {
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
	switch classify(err) {
	case ClassSerialization, ClassDeadlock, ClassLockTimeout, ClassConnection:
		return true
	}
	return false
}

// IsDuplicateKey reports whether err is a unique violation (23505). A
// service may use it for its own tables.
func IsDuplicateKey(err error) bool { return classify(err) == ClassDuplicate }
