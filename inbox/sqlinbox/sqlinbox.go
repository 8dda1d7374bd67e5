// Package sqlinbox is the inbox.Inbox on database/sql, one piece for
// every database: the Inbox type and its Options, which inbox/mysql and
// inbox/postgres construct (their Inbox and Options are these), so that
// code taking a *sqlinbox.Inbox serves either. Construct one with
// inbox/mysql's or inbox/postgres's New: this package's New takes the
// database's dialect, which only they have.
//
// What each database does its own way (an internal dialect) is its SQL
// and schema file, how it reads the database's errors, how a
// transaction proves the message's row is still its own, how a purge
// picks its batch, and what a migration holds (a connection and a named
// lock, or a transaction). The database's package documents what that
// means for a user: which table names it accepts, what a stricter
// isolation level costs, how concurrent redeliveries wait, how purges on
// several instances share the work, and how Migrate takes turns.
//
// Beneath Process is inbox/internal/txproc: the loop of transactions,
// the handler's call, and the Observer's events.
package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/inbox/internal/sqldialect"
)

// Inbox is the inbox.Inbox of one consumer on one table of a MySQL,
// MariaDB or PostgreSQL database: inbox/mysql's and inbox/postgres's
// Inbox. It is safe for concurrent use, by many goroutines and by many
// processes on one database.
type Inbox struct {
	db     *sql.DB
	d      sqldialect.Dialect
	opts   Options
	txOpts *sql.TxOptions
	log    *slog.Logger
	sql    sqldialect.Statements
}

var _ inbox.Inbox = (*Inbox)(nil)

// New returns the inbox of opts.Consumer on db, in d's dialect, with
// opts' defaults filled in. It does not touch the database. Invalid
// options fail with an error naming the field. It is what inbox/mysql's
// and inbox/postgres's New call: call theirs.
func New(db *sql.DB, d sqldialect.Dialect, opts Options) (*Inbox, error) {
	if db == nil {
		return nil, fmt.Errorf("%s: db is nil", d.Name())
	}
	opts = opts.withDefaults()
	if err := opts.validate(d); err != nil {
		return nil, err
	}
	return &Inbox{
		db:     db,
		d:      d,
		opts:   opts,
		txOpts: &sql.TxOptions{Isolation: opts.Isolation},
		log:    opts.Logger.With(slog.String("inbox", opts.Table), slog.String("consumer", opts.Consumer)),
		sql:    d.Statements().Fill(opts.Table),
	}, nil
}

// Options returns the inbox's options, with their defaults filled in.
func (ib *Inbox) Options() Options { return ib.opts }

// Table returns the name of the inbox table.
func (ib *Inbox) Table() string { return ib.opts.Table }

// Consumer returns the consumer name.
func (ib *Inbox) Consumer() string { return ib.opts.Consumer }

// Contains reports whether the consumer has processed message id (and
// retention has not deleted the record yet). For tests and operators; it
// is safe for concurrent use.
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
		return false, ib.wrap("contains", err)
	}
	return true, nil
}

// wrap gives a database error of operation op the inbox's prefix and,
// when the table does not exist, the hint to migrate.
func (ib *Inbox) wrap(op string, err error) error {
	if ib.d.IsNoTable(err) {
		return fmt.Errorf("%s: %s: table %q does not exist (run Inbox.Migrate): %w", ib.d.Name(), op, ib.opts.Table, err)
	}
	return fmt.Errorf("%s: %s: %w", ib.d.Name(), op, err)
}
