// Package mysqlerr classifies the errors of MySQL and MariaDB, in one
// place, for the repository's MySQL packages (store/mysql, inbox/mysql):
// what a failure is (a deadlock, a lock wait timeout, a lost connection,
// a duplicate key, …) decides whether a statement or a transaction is
// run again.
package mysqlerr

import (
	"errors"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/connlost"
)

// Class is what kind of failure a database error is.
type Class int

// The classes.
const (
	Other Class = iota
	// Duplicate: a unique key was violated (ER_DUP_ENTRY).
	Duplicate
	// Deadlock: InnoDB chose this transaction as a deadlock victim,
	// or (MariaDB with innodb_snapshot_isolation, the default from 11.6.2)
	// refused to lock a row changed since the read view was made
	// (ER_CHECKREAD); either way it rolled the transaction back, and
	// running it again is the cure.
	Deadlock
	// LockWait: a lock wait timed out.
	LockWait
	// Connection: the connection broke or the server went away; the
	// statement may or may not have been applied.
	Connection
	// NoTable: the table does not exist (Migrate was not run).
	NoTable
	// DuplicateIndex: an index of that name exists (a concurrent
	// Migrate added it).
	DuplicateIndex
	// DuplicateColumn: a column of that name exists (likewise).
	DuplicateColumn
	// AlgorithmRefused: the server cannot run an ALTER with the
	// ALGORITHM or LOCK asked for (Migrate falls back to a slower one).
	AlgorithmRefused
	// AccessDenied: the user may not run the statement (a Migrate by
	// a user without DDL rights).
	AccessDenied
)

// MySQL and MariaDB error numbers the store tells apart.
const (
	erDupEntry          = 1062
	erDupKeyName        = 1061
	erDupFieldName      = 1060
	erLockWaitTimeout   = 1205
	erLockNowait        = 3572 // MySQL's NOWAIT refused (MariaDB answers 1205)
	erLockDeadlock      = 1213
	erCheckRead         = 1020 // MariaDB 11.6.2+: "Record has changed since last read"
	erNoSuchTable       = 1146
	erServerShutdown    = 1053
	erQueryInterrupted  = 1317
	erConnectionKilled  = 1927 // MariaDB
	crServerGone        = 2006
	crServerLost        = 2013
	erClientInteraction = 4031 // MySQL 8: disconnected for inactivity

	erAlterOperationNotSupported       = 1845
	erAlterOperationNotSupportedReason = 1846
	erTableAccessDenied                = 1142
	erDBAccessDenied                   = 1044
)

// String names the class, for messages.
func (c Class) String() string {
	switch c {
	case Duplicate:
		return "duplicate key"
	case Deadlock:
		return "deadlock"
	case LockWait:
		return "lock wait timeout"
	case Connection:
		return "connection lost"
	case NoTable:
		return "table missing"
	case DuplicateIndex:
		return "duplicate index name"
	case DuplicateColumn:
		return "duplicate column name"
	case AlgorithmRefused:
		return "algorithm refused"
	case AccessDenied:
		return "access denied"
	}
	return "other"
}

// Classify says what kind of failure err is: a *mysql.MySQLError by its
// number, a broken connection by the driver's, net's and syscall's
// errors; a cancelled or expired context is Other.
func Classify(err error) Class {
	if err == nil {
		return Other
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erDupEntry:
			return Duplicate
		case erLockDeadlock, erCheckRead:
			return Deadlock
		case erLockWaitTimeout, erLockNowait:
			return LockWait
		case erNoSuchTable:
			return NoTable
		case erDupKeyName:
			return DuplicateIndex
		case erDupFieldName:
			return DuplicateColumn
		case erAlterOperationNotSupported, erAlterOperationNotSupportedReason:
			return AlgorithmRefused
		case erTableAccessDenied, erDBAccessDenied:
			return AccessDenied
		case erServerShutdown, erQueryInterrupted, erConnectionKilled, crServerGone, crServerLost, erClientInteraction:
			return Connection
		}
		return Other
	}
	if connlost.Is(err, mysqldrv.ErrInvalidConn) {
		return Connection
	}
	return Other
}

// IsTransient reports whether err is a database failure worth retrying as
// a whole: a deadlock (or MariaDB's "record has changed since last
// read"), a lock wait timeout, or a lost connection. A service may use it
// to retry its own command transaction.
func IsTransient(err error) bool {
	switch Classify(err) {
	case Deadlock, LockWait, Connection:
		return true
	}
	return false
}

// IsDuplicateKey reports whether err is a unique-key violation
// (ER_DUP_ENTRY).
func IsDuplicateKey(err error) bool {
	return Classify(err) == Duplicate
}
