package postgres

import "github.com/outboxrelay/outboxrelay/internal/pgerr"

// The package's errors are classified by internal/pgerr, which
// store/postgres shares; these are its names here.
type class = pgerr.Class

const (
	classOther             = pgerr.Other
	classUniqueViolation   = pgerr.UniqueViolation
	classSerialization     = pgerr.Serialization
	classDeadlock          = pgerr.Deadlock
	classLockTimeout       = pgerr.LockTimeout
	classConnection        = pgerr.Connection
	classUndefinedTable    = pgerr.UndefinedTable
	classFailedTransaction = pgerr.FailedTransaction
)

var (
	sqlState    = pgerr.SQLState
	classify    = pgerr.Classify
	isTransient = pgerr.IsTransient
)
