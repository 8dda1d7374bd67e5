package mysql

import "github.com/outboxrelay/outboxrelay/internal/mysqlerr"

// The store classifies every database error it sees with
// mysqlerr.Classify, which inbox/mysql shares; the two functions below
// are the part of it a service may use.

// IsTransient reports whether err is a database failure worth retrying as
// a whole: a deadlock (or MariaDB's "record has changed since last
// read"), a lock wait timeout, or a lost connection. A service may use it
// to retry its own command transaction.
func IsTransient(err error) bool { return mysqlerr.IsTransient(err) }

// IsDuplicateKey reports whether err is a unique-key violation
// (ER_DUP_ENTRY). A service may use it for its own tables.
func IsDuplicateKey(err error) bool { return mysqlerr.IsDuplicateKey(err) }
