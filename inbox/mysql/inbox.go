package mysql

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/sqlinbox"
)

// DefaultTable is the table name when Options.Table is empty.
const DefaultTable = sqlinbox.DefaultTable

// MaxTableLength is the longest table name accepted. It leaves room under
// MySQL's 64-character identifier limit for <table>_schema_version.
const MaxTableLength = sqlinbox.MaxTableLength

// MaxConsumerLength is the longest consumer name.
const MaxConsumerLength = sqlinbox.MaxConsumerLength

// DefaultMaxAttempts is Options.MaxAttempts' default.
const DefaultMaxAttempts = sqlinbox.DefaultMaxAttempts

// MaxPurgeBatch is the largest batch Purge accepts.
const MaxPurgeBatch = sqlinbox.MaxPurgeBatch

// DefaultRetention is the retention window the package documents and
// examples use: processed IDs are kept 7 days (NServiceBus keeps its
// deduplication records as long by default). Purge takes the window as an
// argument; the inbox deletes nothing by itself.
const DefaultRetention = 7 * 24 * time.Hour

// Options configures an Inbox.
type Options struct {
	// Table is the name of the inbox table in the database the *sql.DB
	// points at. Defaults to DefaultTable ("inbox"). It must be a plain
	// identifier (letters, digits, underscores; not starting with a
	// digit) of at most MaxTableLength characters. Several consumers may
	// share a table: their rows are told apart by Consumer.
	Table string
	// Consumer names the consumer whose messages the inbox records, such
	// as "activity-service". Required: 1 to MaxConsumerLength letters,
	// digits, '_', '.' or '-', not starting with '.' or '-'. Every
	// instance of one consumer must use the same name; each consumer of
	// the same messages needs its own.
	Consumer string
	// MaxAttempts bounds the transactions one Process call begins: a
	// transaction rolled back by a deadlock, a lock wait timeout or a
	// lost connection is tried again, after a short randomised backoff,
	// until this many have been begun. Defaults to DefaultMaxAttempts
	// (16); at most 1000.
	MaxAttempts int
	// Isolation is the isolation level of Process's transactions, which
	// the handler's writes share. Defaults to sql.LevelReadCommitted, under
	// which the duplicate check locks only the message's own row (under
	// REPEATABLE READ it also locks the gap before it, so that
	// concurrent messages conflict more often). sql.LevelRepeatableRead
	// and sql.LevelSerializable are accepted too.
	Isolation sql.IsolationLevel
	// Observer, if set, receives an Event for every outcome, conflict
	// and purge, for metrics.
	Observer inbox.Observer
	// Logger receives a line for every handler panic (Error, with the
	// stack) and every retried conflict (Debug). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Inbox is the inbox.Inbox of one consumer on MySQL 8.0+ or MariaDB
// 10.6+. It is safe for concurrent use, by many goroutines and by many
// processes on one database.
type Inbox struct {
	core *sqlinbox.Inbox
}

var _ inbox.Inbox = (*Inbox)(nil)

// New returns the inbox of opts.Consumer on db, which must be the
// database the handlers write to. It does not touch the database; call
// Migrate once (say, at start-up) to create the table. Invalid options
// fail with an error naming the field.
func New(db *sql.DB, opts Options) (*Inbox, error) {
	// sqlinbox.Options has the fields of Options, in their order.
	core, err := sqlinbox.New(db, dialect{}, sqlinbox.Options(opts))
	if err != nil {
		return nil, err
	}
	return &Inbox{core: core}, nil
}

// Table returns the name of the inbox table.
func (ib *Inbox) Table() string { return ib.core.Options().Table }

// Consumer returns the consumer name.
func (ib *Inbox) Consumer() string { return ib.core.Options().Consumer }

// Contains reports whether the consumer has processed message id (and
// retention has not deleted the record yet). For tests and operators.
func (ib *Inbox) Contains(ctx context.Context, id string) (bool, error) {
	return ib.core.Contains(ctx, id)
}

// Process runs h once per message id of the inbox's consumer: in one
// transaction it inserts the row (consumer, id), runs h, sets the row's
// processed_at to the database clock (the transaction's last statement:
// the retention window counts from there), and commits. An id already
// recorded returns inbox.Duplicate without running h. An error from h (or
// a panic, as an *inbox.PanicError) rolls back the row and h's writes and
// is returned: the message can be processed again.
//
// The row's primary key does the duplicate check. A concurrent Process of
// the same id (another goroutine, process or host) blocks on the INSERT
// until the transaction holding the row ends: it then fails with a
// duplicate key (inbox.Duplicate) if that transaction committed, and goes
// on to run h if it rolled back. A transaction rolled back by a deadlock
// (say, three redeliveries waiting on one row, or handlers locking shared
// rows in different orders), a lock wait timeout (a handler holding the
// row longer than innodb_lock_wait_timeout) or a lost connection is begun
// again, after a randomised backoff, up to Options.MaxAttempts
// transactions; h is called again in the new one. A conflict error that h
// returns counts the same, provided it is the database's (h must return
// it, not swallow it). A commit whose connection was lost is tried again
// too: the new transaction finds the row if the commit had applied, and
// returns inbox.Duplicate.
//
// When ctx is done, Process stops and returns ctx's error, wrapped.
func (ib *Inbox) Process(ctx context.Context, id string, h inbox.Handler) (inbox.Result, error) {
	return ib.core.Process(ctx, id, h)
}

// Purge deletes the consumer's records of messages processed longer ago
// than olderThan (on the database clock), oldest first, and returns how
// many it deleted. A record's age counts from the end of its handler's
// transaction (see Process), so a message whose handler ran longer than
// olderThan is kept as long as any other; a message whose handler is
// still running is neither deleted nor waited for.
//
// It deletes in batches of at most batch rows, each one short
// transaction of its own, until a batch finds fewer than batch rows; ctx
// ends it between batches. A batch reads the oldest records through the
// index (consumer, processed_at), without locks, then deletes those that
// are still older than the window by their primary key: it reads about as
// many rows as it deletes, however large the table, and locks only those.
// Other consumers' records are never touched. A deadlock, lock wait
// timeout or lost connection is retried (a batch is idempotent).
//
// A message redelivered after its record was purged is processed again:
// the retention window must be longer than any redelivery can be late
// (DefaultRetention, 7 days, is the documented choice).
func (ib *Inbox) Purge(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	return ib.core.Purge(ctx, olderThan, batch)
}

// Migrate creates the inbox table and <table>_schema_version if they do
// not exist, records the schema version, and checks that the table has
// the columns the inbox needs. It is idempotent and safe to run from
// several instances at start-up: they take turns on a named lock
// (GET_LOCK). When the table is already current it runs no DDL, so a
// database user without CREATE rights may call it. A table of the same
// name that the inbox did not make fails, before any DDL, with an error
// naming what it lacks; one recorded at a newer schema version than this
// build knows fails too.
func (ib *Inbox) Migrate(ctx context.Context) error {
	return ib.core.Migrate(ctx)
}

// SchemaSQL returns the SQL that creates the inbox table named table at
// the current SchemaVersion, with its names filled in, for a migration
// tool (golang-migrate, goose, atlas) or a DBA to apply instead of
// Migrate. Migrate runs the same statements.
func SchemaSQL(table string) (string, error) {
	return sqlinbox.SchemaSQL(dialect{}, table)
}
