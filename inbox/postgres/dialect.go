package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"regexp"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
	"github.com/outboxrelay/outboxrelay/inbox/sqlinbox"
	"github.com/outboxrelay/outboxrelay/internal/pgerr"
)

// dialect is PostgreSQL's part of the inbox (sqlinbox has the rest): the
// SQL, the error classification of internal/pgerr, and below them how a
// stamp that changed no row is told, which of a handler's errors are
// conflicts, and how a purge picks its batch. The schema and the
// migration are in schema.go.
type dialect struct{}

var _ sqldialect.Dialect = dialect{}

func (dialect) Name() string { return "postgres inbox" }

var tableNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (dialect) TableName() (*regexp.Regexp, string) {
	return tableNameRE, "lower-case letters, digits and underscores, not starting with a digit"
}

// Statements: msg_id is bytea, so every ID is passed as its UTF-8 bytes
// (IDArg).
func (dialect) Statements() sqldialect.Statements {
	return sqldialect.Statements{
		// The primary key is the arbiter: a second INSERT of a key waits
		// for the transaction holding it, then inserts nothing if it
		// committed.
		Insert: `INSERT INTO "{table}" (consumer, msg_id, processed_at) VALUES ($1, $2, clock_timestamp())
 ON CONFLICT (consumer, msg_id) DO NOTHING`,
		// The last statement before COMMIT; xmin proves the row is still
		// this transaction's own (see Unstamped).
		Stamp: `UPDATE "{table}" SET processed_at = clock_timestamp()
 WHERE consumer = $1 AND msg_id = $2 AND xmin = pg_current_xact_id()::xid`,
		Contains: `SELECT 1 FROM "{table}" WHERE consumer = $1 AND msg_id = $2`,
		// The oldest rows of one consumer through the index (consumer,
		// processed_at), locked as they are read; a row another
		// transaction holds (another purge's) is skipped, not waited for.
		// Rows of transactions in progress are invisible to it. The rows
		// are then deleted by their physical address (ctid, stable while
		// the row is locked): a Tid Scan, where a join on the key let the
		// planner hash the whole table.
		Purge: `DELETE FROM "{table}" WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM "{table}"
   WHERE consumer = $1 AND processed_at < statement_timestamp() - make_interval(secs => $2)
   ORDER BY processed_at
   LIMIT $3
   FOR UPDATE SKIP LOCKED))`,
	}
}

// quote quotes a validated identifier.
func quote(name string) string { return `"` + name + `"` }

func (dialect) IDArg(id string) any { return []byte(id) }

// The errors are classified by internal/pgerr, which store/postgres
// shares.

func (dialect) IsTransient(err error) bool { return pgerr.IsTransient(err) }
func (dialect) IsNoTable(err error) bool   { return pgerr.Classify(err) == pgerr.UndefinedTable }

// IsDuplicateKey is false: Insert's ON CONFLICT on the primary key
// reports a recorded ID by inserting no row, so a unique violation is
// another index's, and an error.
func (dialect) IsDuplicateKey(error) bool { return false }

// IsFailedTransaction: after a statement failed (and the handler
// swallowed the error), PostgreSQL refuses every statement until the
// rollback (in_failed_sql_transaction).
func (dialect) IsFailedTransaction(err error) bool {
	return pgerr.Classify(err) == pgerr.FailedTransaction
}

// Unstamped: the stamp changes the row only while it is the
// transaction's own (its xmin the transaction's ID). When it is not, the
// transaction it was inserted in has ended inside the handler (a
// ROLLBACK or COMMIT statement) and the handler's later statements ran
// outside it. (Until the commit no purge sees the row: PostgreSQL shows
// no transaction another's uncommitted rows.)
func (dialect) Unstamped(context.Context, *sql.Tx, sqldialect.Statements, string, string) error {
	return &txproc.HandlerError{Err: errors.New("the message's record is no longer in the handler's transaction: the transaction ended inside the handler, by a ROLLBACK or COMMIT statement")}
}

// IsHandlerConflict reports whether a handler's error is the database's
// conflict (not, say, a timeout of a network call the handler made): a
// server error with a transient SQLSTATE, a connection database/sql or
// the driver found broken, or a network error when the transaction's own
// connection turns out to be gone as well.
func (dialect) IsHandlerConflict(ctx context.Context, tx *sql.Tx, err error) bool {
	if _, ok := pgerr.SQLState(err); ok {
		return pgerr.IsTransient(err)
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	if pgerr.Classify(err) != pgerr.Connection {
		return false
	}
	_, perr := tx.ExecContext(ctx, "SELECT 1")
	return perr != nil && pgerr.Classify(perr) == pgerr.Connection
}

// MaxPurgeBatch is the largest batch Purge accepts: sqlinbox.MaxPurgeBatch.
const MaxPurgeBatch = sqlinbox.MaxPurgeBatch

// PurgeBatch is one batch of Purge: one DELETE in a READ COMMITTED
// transaction of its own (whatever the server's default), which sees no
// transaction in progress and locks only the rows it deletes. It finds
// as many old records as it deletes.
func (dialect) PurgeBatch(ctx context.Context, tx *sql.Tx, st sqldialect.Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error) {
	n, err := sqldialect.Exec(ctx, tx, st.Purge, consumer, olderThan.Seconds(), batch)
	return n, n, err
}

// Options configures an Inbox: they are sqlinbox.Options, whose fields
// and defaults are documented there (the limits and defaults are
// sqlinbox's constants: DefaultTable, MaxTableLength, MaxConsumerLength,
// DefaultMaxAttempts, MaxMaxAttempts). The zero value, with Consumer
// set, is every default. On PostgreSQL:
//
//   - Table is looked up on the connection's search_path. It must be
//     lower-case letters, digits and underscores, not starting with a
//     digit, of at most sqlinbox.MaxTableLength (48) characters, which
//     leaves room under PostgreSQL's 63-byte identifier limit for
//     <table>_schema_version. The inbox quotes it, and a lower-case name
//     is then the same table whether a DBA quotes it or not.
//   - MaxAttempts counts the transactions rolled back by a deadlock, a
//     serialization failure, a lock timeout (lock_timeout) or a lost
//     connection.
//   - Isolation: under the default, sql.LevelReadCommitted, a
//     redelivery waits for the transaction that holds the message's row
//     and then finds it (Duplicate) or inserts it. Under
//     sql.LevelRepeatableRead and sql.LevelSerializable a redelivery
//     that waited ends in a serialization failure instead, which Process
//     retries: one more transaction per such wait.
type Options = sqlinbox.Options

// Inbox is the inbox.Inbox of one consumer on PostgreSQL 13+: a
// sqlinbox.Inbox, whose methods are documented there (Process, Purge,
// Migrate, Contains, Table, Consumer, Options). It is safe for
// concurrent use, by many goroutines and by many processes on one
// database. What PostgreSQL does its own way in Process, Purge and
// Migrate is in the package documentation.
type Inbox = sqlinbox.Inbox

// New returns the inbox of opts.Consumer on db, which must be the
// database the handlers write to (a database/sql pool: pgx's stdlib
// driver, or stdlib.OpenDBFromPool over a pgxpool). It does not touch the
// database; call Migrate once (say, at start-up) to create the table.
// Invalid options fail with an error naming the field.
func New(db *sql.DB, opts Options) (*Inbox, error) {
	return sqlinbox.New(db, dialect{}, opts)
}
