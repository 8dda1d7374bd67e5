package postgres

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
// PostgreSQL's 63-byte identifier limit for <table>_schema_version.
const MaxTableLength = sqlinbox.MaxTableLength

// MaxConsumerLength is the longest consumer name.
const MaxConsumerLength = sqlinbox.MaxConsumerLength

// DefaultMaxAttempts is Options.MaxAttempts' default.
const DefaultMaxAttempts = sqlinbox.DefaultMaxAttempts

// MaxMaxAttempts is the largest Options.MaxAttempts accepted.
const MaxMaxAttempts = sqlinbox.MaxMaxAttempts

// MaxPurgeBatch is the largest batch Purge accepts.
const MaxPurgeBatch = sqlinbox.MaxPurgeBatch

// DefaultRetention is the retention window the package documents and
// examples use: processed IDs are kept 7 days (NServiceBus keeps its
// deduplication records as long by default). Purge takes the window as an
// argument; the inbox deletes nothing by itself.
const DefaultRetention = 7 * 24 * time.Hour

// Options configures an Inbox. The zero value, with Consumer set, is
// every default.
type Options struct {
	// Table is the name of the inbox table, looked up on the
	// connection's search_path. Defaults to DefaultTable ("inbox"). It
	// must be lower-case letters, digits and underscores, not starting
	// with a digit, of at most MaxTableLength characters: the inbox
	// quotes it, and a lower-case name is then the same table whether a
	// DBA quotes it or not. Several consumers may share a table: their
	// rows are told apart by Consumer.
	Table string
	// Consumer names the consumer whose messages the inbox records, such
	// as "activity-service". Required: 1 to MaxConsumerLength letters,
	// digits, '_', '.' or '-', not starting with '.' or '-'. Every
	// instance of one consumer must use the same name; each consumer of
	// the same messages needs its own.
	Consumer string
	// MaxAttempts bounds the transactions one Process call begins: a
	// transaction rolled back by a deadlock, a serialization failure, a
	// lock timeout or a lost connection is tried again, after a short
	// randomised backoff, until this many have been begun. Defaults to
	// DefaultMaxAttempts (16); at most MaxMaxAttempts.
	MaxAttempts int
	// Isolation is the isolation level of Process's transactions, which
	// the handler's writes share. Defaults to sql.LevelReadCommitted:
	// a redelivery waits for the transaction that holds the message's
	// row and then finds it (Duplicate) or inserts it. Under
	// sql.LevelRepeatableRead and sql.LevelSerializable (also accepted) a
	// redelivery that waited ends in a serialization failure instead,
	// which Process retries: one more transaction per such wait.
	Isolation sql.IsolationLevel
	// Observer, if set, receives an Event for every outcome, conflict
	// and purge, for metrics.
	Observer inbox.Observer
	// Logger receives a line for every handler panic (Error, with the
	// stack) and every retried conflict (Debug). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Inbox is the inbox.Inbox of one consumer on PostgreSQL 13+. It is safe
// for concurrent use, by many goroutines and by many processes on one
// database.
type Inbox struct {
	core *sqlinbox.Inbox
}

var _ inbox.Inbox = (*Inbox)(nil)

// New returns the inbox of opts.Consumer on db, which must be the
// database the handlers write to (a database/sql pool: pgx's stdlib
// driver, or stdlib.OpenDBFromPool over a pgxpool). It does not touch the
// database; call Migrate once (say, at start-up) to create the table.
// Invalid options fail with an error naming the field.
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
// retention has not deleted the record yet). For tests and operators; it
// is safe for concurrent use.
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
// The row's primary key does the duplicate check: INSERT … ON CONFLICT
// DO NOTHING. A concurrent Process of the same id (another goroutine,
// process or host) waits in its INSERT until the transaction holding the
// row ends: it then inserts nothing (inbox.Duplicate) if that transaction
// committed, and inserts the row and runs h if it rolled back. Waiting
// redeliveries never deadlock each other, and no unique violation is
// raised. A transaction rolled back by a deadlock (handlers locking
// shared rows in different orders), a serialization failure (under
// REPEATABLE READ or SERIALIZABLE), a lock timeout (lock_timeout) or a
// lost connection is begun again, after a randomised backoff, up to
// Options.MaxAttempts transactions; h is called again in the new one. A
// conflict error that h returns counts the same, provided it is the
// database's (h must return it, not swallow it). A commit whose
// connection was lost is tried again too: the new transaction finds the
// row if the commit had applied, and returns inbox.Duplicate.
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
// still running is neither deleted nor waited for (its row is invisible
// to every other transaction until it commits).
//
// It deletes in batches of at most batch rows, each one short
// transaction of its own (one DELETE), until a batch deletes fewer than
// batch rows; ctx ends it between batches. A batch reads the oldest
// records through the index (consumer, processed_at), so it reads about
// as many rows as it deletes, however large the table, and it locks them
// with SKIP LOCKED: purges running at once on several instances delete
// different rows and never wait for each other. Other consumers' records
// are never touched. A deadlock, serialization failure, lock timeout or
// lost connection is retried (a batch is idempotent). Purge is safe for
// concurrent use.
//
// A message redelivered after its record was purged is processed again:
// the retention window must be longer than any redelivery can be late
// (DefaultRetention, 7 days, is the documented choice).
func (ib *Inbox) Purge(ctx context.Context, olderThan time.Duration, batch int) (int, error) {
	return ib.core.Purge(ctx, olderThan, batch)
}

// Migrate creates the inbox table, its index and <table>_schema_version
// if they do not exist, records the schema version, and checks that the
// table has the columns and the primary key the inbox needs. It runs in
// one transaction, so a failure leaves nothing half made. It is
// idempotent and safe to run from several instances at start-up: they
// take turns on a transaction-scoped advisory lock
// (pg_advisory_xact_lock, keyed by the table's name), which the commit
// releases, and which also keeps two CREATE TABLE IF NOT EXISTS from
// racing. When the table is already current it runs no DDL, so a
// database user without CREATE rights may call it. A table of the same
// name that the inbox did not make fails with an error naming what it
// lacks; one recorded at a newer schema version than this build knows
// fails too.
func (ib *Inbox) Migrate(ctx context.Context) error {
	return ib.core.Migrate(ctx)
}

// SchemaSQL returns the SQL that creates the inbox table named table at
// the current SchemaVersion, with its names filled in, for a migration
// tool (golang-migrate, goose, atlas) or a DBA to apply instead of
// Migrate. Migrate runs the same statements, in one transaction.
func SchemaSQL(table string) (string, error) {
	return sqlinbox.SchemaSQL(dialect{}, table)
}
