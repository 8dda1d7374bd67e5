// Package sqldialect is what one database does its own way in the inbox
// of inbox/sqlinbox: its SQL and schema file, how it reads the
// database's errors, how a transaction proves its row is still its own,
// how a purge picks its batch, and what a migration holds (a connection
// and a named lock, or a transaction). inbox/mysql and inbox/postgres
// each implement Dialect; sqlinbox is the rest, once.
package sqldialect

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"time"
)

// Dialect is one database's part of the inbox. Its methods are safe
// for concurrent use; those given a transaction run their statements in
// it and return the database's errors as they are.
type Dialect interface {
	// Name names the inbox in errors: "mysql inbox".
	Name() string
	// TableName matches the table names the inbox accepts (at most
	// sqlinbox.MaxTableLength long), which rule says in words for the error that
	// refuses one: "letters, digits and underscores, not starting with a
	// digit".
	TableName() (re *regexp.Regexp, rule string)
	// Statements returns the inbox's SQL, with {table} where the table's
	// name goes (quoted by the SQL itself: a valid name needs no
	// escaping).
	Statements() Statements
	// Schema returns the schema file: statements that create the inbox
	// table at the schema version, and record it, written as Statements
	// are, with {version} where the version goes; each ends with ";" at
	// the end of a line; whole lines starting with "--" are comments.
	Schema() (file string, version int)
	// IDArg is a message ID as the statements take it.
	IDArg(id string) any

	// IsTransient reports a database error after which a new
	// transaction may succeed (a deadlock, a lock timeout, a lost
	// connection).
	IsTransient(err error) bool
	// IsDuplicateKey reports an error of Statements.Insert that means
	// the ID is recorded already (MySQL's duplicate key); false where
	// Insert says so by inserting no row.
	IsDuplicateKey(err error) bool
	// IsNoTable reports the error of a statement on a table that does
	// not exist.
	IsNoTable(err error) bool
	// IsFailedTransaction reports the error of a statement that a
	// transaction refused because an earlier one failed.
	IsFailedTransaction(err error) bool
	// IsHandlerConflict reports whether an error the handler returned
	// is the database's conflict, to retry in a new transaction (not,
	// say, the timeout of a network call the handler made). tx is the
	// handler's transaction.
	IsHandlerConflict(ctx context.Context, tx *sql.Tx, err error) bool

	// Unstamped is called when st.Stamp changed no row in tx: it
	// returns nil if the message's row is tx's own after all, and
	// otherwise a *txproc.HandlerError that says how the handler lost
	// it.
	Unstamped(ctx context.Context, tx *sql.Tx, st Statements, consumer, id string) error
	// PurgeBatch deletes in tx (READ COMMITTED) at most batch of the
	// consumer's records older than olderThan, oldest first, and returns
	// how many old records it found and how many it deleted. A purge
	// ends at a batch that found fewer than batch.
	PurgeBatch(ctx context.Context, tx *sql.Tx, st Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error)
	// BeginMigration begins a Migrate of the inbox table named table.
	BeginMigration(ctx context.Context, db *sql.DB, table string) (Migration, error)
}

// SchemaVersionSuffix makes the name of the table that records an inbox
// table's schema version: <table>_schema_version.
const SchemaVersionSuffix = "_schema_version"

// A Migration is one Migrate's hold on the database (a connection, or
// a transaction where DDL is transactional), which Dialect.BeginMigration
// returns for the inbox's table. Its methods return the database's
// errors as they are.
type Migration interface {
	// Lock waits for the lock that makes the Migrates of one table take
	// turns, until ctx is done.
	Lock(ctx context.Context) error
	// Version reads the table's recorded schema version; 0 when there
	// is none.
	Version(ctx context.Context) (int, error)
	// Lacks reads the table's columns and reports whether it exists and
	// what it lacks of what the inbox needs, in words: "column msg_id",
	// "primary key (consumer, msg_id)".
	Lacks(ctx context.Context) (exists bool, missing []string, err error)
	// Exec runs one statement of the schema.
	Exec(ctx context.Context, statement string) error
	// Commit keeps what the migration did, where a transaction holds it.
	Commit() error
	// Close releases the lock and ends the migration, rolling back what
	// Commit did not keep.
	Close()
}

// Statements are the SQL of the inbox. Insert, Stamp and Contains take
// the consumer and the message ID (as Dialect.IDArg makes it); the
// purges are the Dialect's own to run.
type Statements struct {
	// Insert records a message: it fails with a duplicate key, or
	// inserts no row, when the ID is recorded already.
	Insert string
	// Stamp sets the row's processed_at to the database clock, if the
	// row is the transaction's own.
	Stamp string
	// Contains selects 1 when the ID is recorded.
	Contains string
	// Purge deletes a batch of old records; PurgeOldest, where the
	// database needs it, reads them first.
	Purge, PurgeOldest string
}

// Fill returns st with table's name in place of {table}.
func (st Statements) Fill(table string) Statements {
	r := strings.NewReplacer("{table}", table)
	return Statements{
		Insert:      r.Replace(st.Insert),
		Stamp:       r.Replace(st.Stamp),
		Contains:    r.Replace(st.Contains),
		Purge:       r.Replace(st.Purge),
		PurgeOldest: r.Replace(st.PurgeOldest),
	}
}

// Exec runs a statement in tx and returns how many rows it changed.
func Exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (int, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
