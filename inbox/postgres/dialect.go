package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"regexp"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
	"github.com/outboxrelay/outboxrelay/internal/pgerr"
)

// dialect is PostgreSQL's part of the inbox (sqlinbox has the rest): the
// SQL, the error classification of internal/pgerr, and below them how a
// stamp that changed no row is told, which of a handler's errors are
// conflicts, and how a purge picks its batch. The schema and the
// migration are in schema.go.
type dialect struct{}

var _ sqlinbox.Dialect = dialect{}

func (dialect) Name() string { return "postgres inbox" }

var tableNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (dialect) TableName() (*regexp.Regexp, string) {
	return tableNameRE, "lower-case letters, digits and underscores, not starting with a digit"
}

// Statements: msg_id is bytea, so every ID is passed as its UTF-8 bytes
// (IDArg).
func (dialect) Statements() sqlinbox.Statements {
	return sqlinbox.Statements{
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
func (dialect) Unstamped(context.Context, *sql.Tx, sqlinbox.Statements, string, string) error {
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

// PurgeBatch is one batch of Purge: one DELETE in a READ COMMITTED
// transaction of its own (whatever the server's default), which sees no
// transaction in progress and locks only the rows it deletes. It finds
// as many old records as it deletes.
func (dialect) PurgeBatch(ctx context.Context, tx *sql.Tx, st sqlinbox.Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error) {
	n, err := sqlinbox.Exec(ctx, tx, st.Purge, consumer, olderThan.Seconds(), batch)
	return n, n, err
}
