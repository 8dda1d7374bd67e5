// Package sqlinbox is the inbox on database/sql, one piece for every
// database: the options, Contains, Process's transaction (its loop is
// txproc's), Purge's batches, Migrate and SchemaSQL. A Dialect is what
// each database does its own way: its SQL and schema file, how it reads
// the database's errors, how a transaction proves its row is still its
// own, how a purge picks its batch, and what a migration holds (a
// connection and a named lock, or a transaction). The packages
// inbox/mysql and inbox/postgres are an Options, a Dialect and the
// documentation.
package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/inbox"
)

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
		sql:    d.Statements().fill(opts.Table),
	}, nil
}

// Options returns the options, with their defaults filled in.
func (ib *Inbox) Options() Options { return ib.opts }

// Statements returns the table's SQL.
func (ib *Inbox) Statements() Statements { return ib.sql }

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
