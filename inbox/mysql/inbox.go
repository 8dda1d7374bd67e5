package mysql

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
// MySQL's 64-character identifier limit for <table>_schema_version.
const MaxTableLength = 48

// MaxConsumerLength is the longest consumer name.
const MaxConsumerLength = txproc.MaxConsumerLength

// DefaultMaxAttempts is Options.MaxAttempts' default.
const DefaultMaxAttempts = txproc.DefaultMaxAttempts

// DefaultRetention is the retention window the package documents and
// examples use: processed IDs are kept 7 days (NServiceBus keeps its
// deduplication records as long by default). Purge takes the window as an
// argument; the inbox deletes nothing by itself.
const DefaultRetention = 7 * 24 * time.Hour

var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
		errs = append(errs, fmt.Errorf("mysql inbox: Table %q: must be letters, digits and underscores, not starting with a digit, at most %d characters", o.Table, MaxTableLength))
	}
	errs = append(errs, o.common().Validate("mysql inbox")...)
	return errors.Join(errs...)
}

// Inbox is the inbox.Inbox of one consumer on MySQL 8.0+ or MariaDB
// 10.6+. It is safe for concurrent use, by many goroutines and by many
// processes on one database.
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
// database the handlers write to. It does not touch the database; call
// Migrate once (say, at start-up) to create the table. Invalid options
// fail with an error naming the field.
func New(db *sql.DB, opts Options) (*Inbox, error) {
	if db == nil {
		return nil, errors.New("mysql inbox: db is nil")
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
// retention has not deleted the record yet). For tests and operators.
func (ib *Inbox) Contains(ctx context.Context, id string) (bool, error) {
	if err := inbox.ValidateID(id); err != nil {
		return false, fmt.Errorf("mysql inbox: contains: %w", err)
	}
	var one int
	err := ib.db.QueryRowContext(ctx, ib.sql.contains, ib.consumer, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, ib.wrap("contains", err)
	}
	return true, nil
}

// statements are the inbox's SQL with its table name filled in.
type statements struct {
	insert, stamp, contains string
	// purgeOldest reads a batch of the oldest records; purge, with
	// {ids} replaced by a placeholder per record, deletes them.
	purgeOldest, purge string
}

func newStatements(table string) statements {
	r := strings.NewReplacer("{inbox}", "`"+table+"`")
	return statements{
		insert:   r.Replace("INSERT INTO {inbox} (consumer, msg_id, processed_at) VALUES (?, ?, UTC_TIMESTAMP(6))"),
		stamp:    r.Replace("UPDATE {inbox} SET processed_at = UTC_TIMESTAMP(6) WHERE consumer = ? AND msg_id = ?"),
		contains: r.Replace("SELECT 1 FROM {inbox} WHERE consumer = ? AND msg_id = ?"),
		purgeOldest: r.Replace("SELECT msg_id FROM {inbox} FORCE INDEX (idx_processed)" +
			" WHERE consumer = ? AND processed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY processed_at LIMIT ?"),
		purge: r.Replace("DELETE FROM {inbox}" +
			" WHERE consumer = ? AND processed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND msg_id IN ({ids})"),
	}
}

// wrap gives a database error the inbox's prefix and, where it helps, a
// hint.
func (ib *Inbox) wrap(op string, err error) error {
	if isNoTable(err) {
		return fmt.Errorf("mysql inbox: %s: table %q does not exist (run Inbox.Migrate): %w", op, ib.table, err)
	}
	return fmt.Errorf("mysql inbox: %s: %w", op, err)
}
