package postgres

import (
	"regexp"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
	"github.com/outboxrelay/outboxrelay/internal/pgerr"
)

// dialect is PostgreSQL's part of the inbox (sqlinbox has the rest): the
// SQL below, the error classification of internal/pgerr, and
// Unstamped, IsHandlerConflict, PurgeBatch and Schema beside what they
// serve.
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

func (dialect) IsTransient(err error) bool    { return pgerr.IsTransient(err) }
func (dialect) IsDuplicateKey(err error) bool { return pgerr.Classify(err) == pgerr.UniqueViolation }
func (dialect) IsNoTable(err error) bool      { return pgerr.Classify(err) == pgerr.UndefinedTable }

// IsFailedTransaction: after a statement failed (and the handler
// swallowed the error), PostgreSQL refuses every statement until the
// rollback (in_failed_sql_transaction).
func (dialect) IsFailedTransaction(err error) bool {
	return pgerr.Classify(err) == pgerr.FailedTransaction
}
