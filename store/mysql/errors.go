package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// errClass is what kind of failure a database error is. Every database
// error the store sees is classified here, in one place.
type errClass int

const (
	classOther errClass = iota
	// classDuplicate: a unique key was violated (ER_DUP_ENTRY).
	classDuplicate
	// classDeadlock: InnoDB chose this transaction as a deadlock victim,
	// or (MariaDB with innodb_snapshot_isolation, the default from 11.6.2)
	// refused to lock a row changed since the read view was made
	// (ER_CHECKREAD); either way it rolled the transaction back, and
	// running it again is the cure.
	classDeadlock
	// classLockWait: a lock wait timed out.
	classLockWait
	// classConnection: the connection broke or the server went away; the
	// statement may or may not have been applied.
	classConnection
	// classNoTable: the table does not exist (Migrate was not run).
	classNoTable
	// classDuplicateIndex: an index of that name exists (a concurrent
	// Migrate added it).
	classDuplicateIndex
	// classDuplicateColumn: a column of that name exists (likewise).
	classDuplicateColumn
	// classAlgorithmRefused: the server cannot run an ALTER with the
	// ALGORITHM or LOCK asked for (Migrate falls back to a slower one).
	classAlgorithmRefused
	// classAccessDenied: the user may not run the statement (a Migrate by
	// a user without DDL rights).
	classAccessDenied
)

// MySQL and MariaDB error numbers the store tells apart.
const (
	erDupEntry          = 1062
	erDupKeyName        = 1061
	erDupFieldName      = 1060
	erLockWaitTimeout   = 1205
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

func (c errClass) String() string {
	switch c {
	case classDuplicate:
		return "duplicate key"
	case classDeadlock:
		return "deadlock"
	case classLockWait:
		return "lock wait timeout"
	case classConnection:
		return "connection lost"
	case classNoTable:
		return "table missing"
	case classDuplicateIndex:
		return "duplicate index name"
	case classDuplicateColumn:
		return "duplicate column name"
	case classAlgorithmRefused:
		return "algorithm refused"
	case classAccessDenied:
		return "access denied"
	}
	return "other"
}

// classify says what kind of failure err is.
func classify(err error) errClass {
	if err == nil {
		return classOther
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erDupEntry:
			return classDuplicate
		case erLockDeadlock, erCheckRead:
			return classDeadlock
		case erLockWaitTimeout:
			return classLockWait
		case erNoSuchTable:
			return classNoTable
		case erDupKeyName:
			return classDuplicateIndex
		case erDupFieldName:
			return classDuplicateColumn
		case erAlterOperationNotSupported, erAlterOperationNotSupportedReason:
			return classAlgorithmRefused
		case erTableAccessDenied, erDBAccessDenied:
			return classAccessDenied
		case erServerShutdown, erQueryInterrupted, erConnectionKilled, crServerGone, crServerLost, erClientInteraction:
			return classConnection
		}
		return classOther
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return classOther
	case errors.Is(err, driver.ErrBadConn),
		errors.Is(err, mysqldrv.ErrInvalidConn),
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

// IsTransient reports whether err is a database failure worth retrying as
// a whole: a deadlock (or MariaDB's "record has changed since last
// read"), a lock wait timeout, or a lost connection. A service may use it
// to retry its own command transaction.
func IsTransient(err error) bool {
	switch classify(err) {
	case classDeadlock, classLockWait, classConnection:
		return true
	}
	return false
}

// IsDuplicateKey reports whether err is a unique-key violation
// (ER_DUP_ENTRY). A service may use it for its own tables.
func IsDuplicateKey(err error) bool {
	return classify(err) == classDuplicate
}
