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
