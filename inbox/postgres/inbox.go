package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/txproc"
)

// DefaultTable is the table name when Options.Table is empty.
const DefaultTable = "inbox"

// MaxTableLength is the longest table name accepted. It leaves room under
// PostgreSQL's 63-byte identifier limit for <table>_schema_version.
const MaxTableLength = 48

// MaxConsumerLength is the longest consumer name.
const MaxConsumerLength = txproc.MaxConsumerLength

// DefaultMaxAttempts is Options.MaxAttempts' default.
const DefaultMaxAttempts = txproc.DefaultMaxAttempts

// MaxMaxAttempts is the largest Options.MaxAttempts accepted.
const MaxMaxAttempts = txproc.MaxMaxAttempts

// DefaultRetention is the retention window the package documents and
// examples use: processed IDs are kept 7 days (NServiceBus keeps its
// deduplication records as long by default). Purge takes the window as an
// argument; the inbox deletes nothing by itself.
const DefaultRetention = 7 * 24 * time.Hour

var tableNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

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

func (o Options) withDefaults() Options {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	c := o.common().WithDefaults()
	o.MaxAttempts, o.Isolation, o.Logger = c.MaxAttempts, c.Isolation, c.Logger
	return o
}

// common is what o shares with every inbox's options.
func (o Options) common() txproc.Common {
	return txproc.Common{Consumer: o.Consumer, MaxAttempts: o.MaxAttempts, Isolation: o.Isolation, Logger: o.Logger}
}

// validate checks options with defaults filled in; each error names the
// field and the value.
func (o Options) validate() error {
	var errs []error
	if len(o.Table) > MaxTableLength || !tableNameRE.MatchString(o.Table) {
		errs = append(errs, fmt.Errorf("postgres inbox: Table %q: must be lower-case letters, digits and underscores, not starting with a digit, at most %d characters", o.Table, MaxTableLength))
	}
	errs = append(errs, o.common().Validate("postgres inbox")...)
	return errors.Join(errs...)
}

// Inbox is the inbox.Inbox of one consumer on PostgreSQL 13+. It is safe
// for concurrent use, by many goroutines and by many processes on one
// database.
type Inbox struct {
	db       *sql.DB
	table    string // validated, unquoted
	consumer string
	opts     Options
	txOpts   *sql.TxOptions
	log      *slog.Logger
	sql      statements
}

var _ inbox.Inbox = (*Inbox)(nil)

// New returns the inbox of opts.Consumer on db, which must be the
// database the handlers write to (a database/sql pool: pgx's stdlib
// driver, or stdlib.OpenDBFromPool over a pgxpool). It does not touch the
// database; call Migrate once (say, at start-up) to create the table.
// Invalid options fail with an error naming the field.
func New(db *sql.DB, opts Options) (*Inbox, error) {
	if db == nil {
		return nil, errors.New("postgres inbox: db is nil")
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Inbox{
		db:       db,
		table:    opts.Table,
		consumer: opts.Consumer,
		opts:     opts,
		txOpts:   &sql.TxOptions{Isolation: opts.Isolation},
		log:      opts.Logger.With(slog.String("inbox", opts.Table), slog.String("consumer", opts.Consumer)),
		sql:      newStatements(opts.Table),
	}, nil
}

// Table returns the name of the inbox table.
func (ib *Inbox) Table() string { return ib.table }

// Consumer returns the consumer name.
func (ib *Inbox) Consumer() string { return ib.consumer }

// Contains reports whether the consumer has processed message id (and
// retention has not deleted the record yet). For tests and operators; it
// is safe for concurrent use.
func (ib *Inbox) Contains(ctx context.Context, id string) (bool, error) {
	if err := inbox.ValidateID(id); err != nil {
		return false, fmt.Errorf("postgres inbox: contains: %w", err)
	}
	var one int
	err := ib.db.QueryRowContext(ctx, ib.sql.contains, ib.consumer, []byte(id)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, ib.wrap("contains", err)
	}
	return true, nil
}

// statements are the inbox's SQL with its table name filled in. msg_id
// is bytea: every ID is passed as its UTF-8 bytes.
type statements struct {
	insert, stamp, contains, purge string
}

func newStatements(table string) statements {
	r := strings.NewReplacer("{inbox}", quote(table))
	return statements{
		// The primary key is the arbiter: a second INSERT of a key waits
		// for the transaction holding it, then inserts nothing if it
		// committed.
		insert: r.Replace(`INSERT INTO {inbox} (consumer, msg_id, processed_at) VALUES ($1, $2, clock_timestamp())
 ON CONFLICT (consumer, msg_id) DO NOTHING`),
		// The last statement before COMMIT; xmin proves the row is still
		// this transaction's own (see stamp).
		stamp: r.Replace(`UPDATE {inbox} SET processed_at = clock_timestamp()
 WHERE consumer = $1 AND msg_id = $2 AND xmin = pg_current_xact_id()::xid`),
		contains: r.Replace(`SELECT 1 FROM {inbox} WHERE consumer = $1 AND msg_id = $2`),
		// The oldest rows of one consumer through the index (consumer,
		// processed_at), locked as they are read; a row another
		// transaction holds (another purge's) is skipped, not waited for.
		// Rows of transactions in progress are invisible to it. The rows
		// are then deleted by their physical address (ctid, stable while
		// the row is locked): a Tid Scan, where a join on the key let the
		// planner hash the whole table.
		purge: r.Replace(`DELETE FROM {inbox} WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM {inbox}
   WHERE consumer = $1 AND processed_at < statement_timestamp() - make_interval(secs => $2)
   ORDER BY processed_at
   LIMIT $3
   FOR UPDATE SKIP LOCKED))`),
	}
}

// quote quotes a validated identifier.
func quote(name string) string { return `"` + name + `"` }

// wrap gives a database error the inbox's prefix and, where it helps, a
// hint.
func (ib *Inbox) wrap(op string, err error) error {
	if classify(err) == classUndefinedTable {
		return fmt.Errorf("postgres inbox: %s: table %q does not exist (run Inbox.Migrate): %w", op, ib.table, err)
	}
	return fmt.Errorf("postgres inbox: %s: %w", op, err)
}
