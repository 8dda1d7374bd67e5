package mysql

import (
	"regexp"

	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
)

// dialect is MySQL's and MariaDB's part of the inbox (sqlinbox has the
// rest): the SQL below, the error classification of internal/mysqlerr,
// and Unstamped, IsHandlerConflict, PurgeBatch and Schema beside what
// they serve.
type dialect struct{}

var _ sqlinbox.Dialect = dialect{}

func (dialect) Name() string { return "mysql inbox" }

var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (dialect) TableName() (*regexp.Regexp, string) {
	return tableNameRE, "letters, digits and underscores, not starting with a digit"
}

// Statements: msg_id is VARBINARY, compared byte by byte; Purge has
// {ids} to replace by a placeholder per record PurgeOldest read.
func (dialect) Statements() sqlinbox.Statements {
	return sqlinbox.Statements{
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
