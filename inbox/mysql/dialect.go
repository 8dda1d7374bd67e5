package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"regexp"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
	"github.com/outboxrelay/outboxrelay/inbox/sqlinbox"
	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// dialect is MySQL's and MariaDB's part of the inbox (sqlinbox has the
// rest): the SQL, the error classification of internal/mysqlerr, and
// below them how a stamp that changed no row is told, which of a
// handler's errors are conflicts, and how a purge picks its batch. The
// schema and the migration are in schema.go.
type dialect struct{}

var _ sqldialect.Dialect = dialect{}

func (dialect) Name() string { return "mysql inbox" }

var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (dialect) TableName() (*regexp.Regexp, string) {
	return tableNameRE, "letters, digits and underscores, not starting with a digit"
}

// Statements: msg_id is VARBINARY, compared byte by byte; Purge has
// {ids} to replace by a placeholder per record PurgeOldest read.
func (dialect) Statements() sqldialect.Statements {
	return sqldialect.Statements{
		Insert:   "INSERT INTO `{table}` (consumer, msg_id, processed_at) VALUES (?, ?, UTC_TIMESTAMP(6))",
		Stamp:    "UPDATE `{table}` SET processed_at = UTC_TIMESTAMP(6) WHERE consumer = ? AND msg_id = ?",
		Contains: "SELECT 1 FROM `{table}` WHERE consumer = ? AND msg_id = ?",
		PurgeOldest: "SELECT msg_id FROM `{table}` FORCE INDEX (idx_processed)" +
			" WHERE consumer = ? AND processed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY processed_at LIMIT ?",
		Purge: "DELETE FROM `{table}`" +
			" WHERE consumer = ? AND processed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND msg_id IN ({ids})",
	}
}

// quote quotes a validated identifier.
func quote(name string) string { return "`" + name + "`" }

func (dialect) IDArg(id string) any { return id }

// The errors are classified by internal/mysqlerr, which store/mysql
// shares.

func (dialect) IsTransient(err error) bool    { return mysqlerr.IsTransient(err) }
func (dialect) IsDuplicateKey(err error) bool { return mysqlerr.IsDuplicateKey(err) }
func (dialect) IsNoTable(err error) bool      { return mysqlerr.Classify(err) == mysqlerr.NoTable }

// IsFailedTransaction is false: a MySQL transaction goes on after a
// failed statement, unless the server rolled it back (Unstamped then
// finds the row gone).
func (dialect) IsFailedTransaction(error) bool { return false }

// Unstamped checks, when the stamp changed no row, whether the row is
// gone or the clock has not moved since the INSERT (the server counts
// changed rows, not matched ones). (The INSERT's time is never
// committed. Until the commit no purge sees the row: Purge reads the
// records it deletes without locks, which skips transactions in
// progress.)
//
// The row is gone when the transaction it was inserted in has ended (the
// handler ran a ROLLBACK statement, or swallowed an error after which
// the server had rolled it back) and the handler's later statements ran
// outside it.
func (dialect) Unstamped(ctx context.Context, tx *sql.Tx, st sqldialect.Statements, consumer, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, st.Contains, consumer, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return &txproc.HandlerError{Err: errors.New("the message's record is no longer in the handler's transaction: the transaction ended inside the handler, by a ROLLBACK statement or after an error the handler did not return")}
	}
	return err
}

// IsHandlerConflict reports whether a handler's error is the
// database's conflict (not, say, a timeout of a network call the handler
// made): a server error that IsTransient accepts, or a connection the
// driver found broken.
func (dialect) IsHandlerConflict(_ context.Context, _ *sql.Tx, err error) bool {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		return mysqlerr.IsTransient(err)
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysqldrv.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone)
}

// MaxPurgeBatch is the largest batch Purge accepts: sqlinbox.MaxPurgeBatch.
const MaxPurgeBatch = sqlinbox.MaxPurgeBatch

// PurgeBatch is one batch of Purge, in a READ COMMITTED transaction
// (whatever the server's default): the SELECT is a plain read, which
// takes no locks and sees no transaction in progress, and the DELETE
// locks only the rows it names. A single DELETE … ORDER BY processed_at LIMIT n would leave the
// choice of index to the optimizer, which for a consumer that owns most
// of the table reads the whole primary key range (and sorts it) and
// locks every row on the way, waiting for each message in progress.
//
// The DELETE checks the age again: a record deleted by another purge
// meanwhile and inserted again by a redelivery is a new record, and
// waiting for its transaction does not make it old.
func (dialect) PurgeBatch(ctx context.Context, tx *sql.Tx, st sqldialect.Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error) {
	age := olderThan.Microseconds()
	rows, err := tx.QueryContext(ctx, st.PurgeOldest, consumer, age, batch)
	if err != nil {
		return 0, 0, err
	}
	args := []any{consumer, age}
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, 0, err
		}
		args = append(args, id)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	found = len(args) - 2
	if found == 0 {
		return 0, 0, nil
	}
	ids := strings.Repeat("?, ", found-1) + "?"
	deleted, err = sqldialect.Exec(ctx, tx, strings.Replace(st.Purge, "{ids}", ids, 1), args...)
	return found, deleted, err
}

// Options configures an Inbox: they are sqlinbox.Options, whose fields
// and defaults are documented there (the limits and defaults are
// sqlinbox's constants: DefaultTable, MaxTableLength, MaxConsumerLength,
// DefaultMaxAttempts, MaxMaxAttempts). The zero value, with Consumer
// set, is every default. On MySQL and MariaDB:
//
//   - Table names a table in the database the *sql.DB points at. It
//     must be letters, digits and underscores, not starting with a
//     digit, of at most sqlinbox.MaxTableLength (48) characters, which
//     leaves room under MySQL's 64-character identifier limit for
//     <table>_schema_version.
//   - MaxAttempts counts the transactions rolled back by a deadlock, a
//     lock wait timeout (innodb_lock_wait_timeout) or a lost connection.
//   - Isolation: under the default, sql.LevelReadCommitted, the
//     duplicate check locks only the message's own row; under
//     sql.LevelRepeatableRead (and sql.LevelSerializable) it also locks
//     the gap before it, so that concurrent messages conflict more
//     often.
type Options = sqlinbox.Options

// Inbox is the inbox.Inbox of one consumer on MySQL 8.0+ or MariaDB
// 10.6+: a sqlinbox.Inbox, whose methods are documented there (Process,
// Purge, Migrate, Contains, Table, Consumer, Options). It is safe for
// concurrent use, by many goroutines and by many processes on one
// database. What MySQL does its own way in Process, Purge and Migrate is
// in the package documentation.
type Inbox = sqlinbox.Inbox

// New returns the inbox of opts.Consumer on db, which must be the
// database the handlers write to (through github.com/go-sql-driver/mysql).
// It does not touch the database; call Migrate once (say, at start-up)
// to create the table. Invalid options fail with an error naming the
// field.
func New(db *sql.DB, opts Options) (*Inbox, error) {
	return sqlinbox.New(db, dialect{}, opts)
}
