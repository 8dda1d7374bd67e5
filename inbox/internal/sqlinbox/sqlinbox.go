// Package sqlinbox is the inbox on database/sql, one piece for every
// database: the options, Contains, Process's transaction (its loop is
// txproc's), Purge's batches and what Migrate and SchemaSQL share. A
// Dialect is what each database does its own way: its SQL, how it reads
// the database's errors, how a transaction proves its row is still its
// own, and how a purge picks its batch. The packages inbox/mysql and
// inbox/postgres are an Options, a Dialect and the documentation.
package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// Dialect is one database's part of the inbox. Its methods are safe
// for concurrent use; those given a transaction run their statements in
// it and return the database's errors as they are.
type Dialect interface {
	// Name names the inbox in errors: "mysql inbox".
	Name() string
	// TableName matches the table names the inbox accepts (at most
	// MaxTableLength long), which rule says in words for the error that
	// refuses one: "letters, digits and underscores, not starting with a
	// digit".
	TableName() (re *regexp.Regexp, rule string)
	// Statements returns the SQL of the inbox table named table (valid).
	Statements(table string) Statements
	// Schema returns the statements that create the inbox table named
	// table at the package's schema version, and record that version.
	Schema(table string) []string
	// IDArg is a message ID as the statements take it.
	IDArg(id string) any

	// IsTransient reports a database error after which a new
	// transaction may succeed (a deadlock, a lock timeout, a lost
	// connection).
	IsTransient(err error) bool
	// IsDuplicateKey reports the error of an INSERT whose key is taken.
	IsDuplicateKey(err error) bool
	// IsNoTable reports the error of a statement on a table that does
	// not exist.
	IsNoTable(err error) bool
	// IsHandlerConflict reports whether an error the handler returned
	// is the database's conflict, to retry in a new transaction (not,
	// say, the timeout of a network call the handler made). tx is the
	// handler's transaction.
	IsHandlerConflict(ctx context.Context, tx *sql.Tx, err error) bool

	// Stamp runs st.Stamp for the message in tx, as its last statement
	// before COMMIT, and checks that the row is still tx's own: it
	// returns a *txproc.HandlerError (or txproc.ErrEndedTx) when the
	// handler ended the transaction or swallowed an error that did.
	Stamp(ctx context.Context, tx *sql.Tx, st Statements, consumer, id string) error
	// PurgeBatch deletes in tx (READ COMMITTED) at most batch of the
	// consumer's records older than olderThan, oldest first, and returns
	// how many old records it found and how many it deleted. A purge
	// ends at a batch that found fewer than batch.
	PurgeBatch(ctx context.Context, tx *sql.Tx, st Statements, consumer string, olderThan time.Duration, batch int) (found, deleted int, err error)
}

// Statements are the SQL of one inbox table, with its name filled in.
// Insert, Stamp and Contains take the consumer and the message ID (as
// Dialect.IDArg makes it); the others are the Dialect's own to run.
type Statements struct {
	// Insert records a message: it fails with a duplicate key, or
	// inserts no row, when the ID is recorded already.
	Insert string
	// Stamp sets the row's processed_at to the database clock.
	Stamp string
	// Contains selects 1 when the ID is recorded.
	Contains string
	// Purge deletes a batch of old records; PurgeOldest, where the
	// database needs it, reads them first.
	Purge, PurgeOldest string
}

// Inbox is the inbox of one consumer on one table. It is safe for
// concurrent use.
type Inbox struct {
	db     *sql.DB
	d      Dialect
	opts   Options
	txOpts *sql.TxOptions
	log    *slog.Logger
	sql    Statements
}

// New returns the inbox of opts.Consumer on db, with opts' defaults
// filled in; invalid options fail with an error naming the field.
func New(db *sql.DB, d Dialect, opts Options) (*Inbox, error) {
	if db == nil {
		return nil, fmt.Errorf("%s: db is nil", d.Name())
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(d); err != nil {
		return nil, err
	}
	return &Inbox{
		db:     db,
		d:      d,
		opts:   opts,
		txOpts: &sql.TxOptions{Isolation: opts.Isolation},
		log:    opts.Logger.With(slog.String("inbox", opts.Table), slog.String("consumer", opts.Consumer)),
		sql:    d.Statements(opts.Table),
	}, nil
}

// Options returns the options, with their defaults filled in.
func (ib *Inbox) Options() Options { return ib.opts }

// Statements returns the table's SQL.
func (ib *Inbox) Statements() Statements { return ib.sql }

// DB returns the database.
func (ib *Inbox) DB() *sql.DB { return ib.db }

// Contains reports whether the consumer's record of message id is in
// the table.
func (ib *Inbox) Contains(ctx context.Context, id string) (bool, error) {
	if err := inbox.ValidateID(id); err != nil {
		return false, fmt.Errorf("%s: contains: %w", ib.d.Name(), err)
	}
	var one int
	err := ib.db.QueryRowContext(ctx, ib.sql.Contains, ib.opts.Consumer, ib.d.IDArg(id)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, ib.Wrap("contains", err)
	}
	return true, nil
}

// Wrap gives a database error of operation op the inbox's prefix and,
// when the table does not exist, the hint to migrate.
func (ib *Inbox) Wrap(op string, err error) error {
	if ib.d.IsNoTable(err) {
		return fmt.Errorf("%s: %s: table %q does not exist (run Inbox.Migrate): %w", ib.d.Name(), op, ib.opts.Table, err)
	}
	return fmt.Errorf("%s: %s: %w", ib.d.Name(), op, err)
}
