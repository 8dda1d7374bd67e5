package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// DefaultTable is the table name when Options.Table is empty.
const DefaultTable = "outbox"

// MaxTableLength is the longest table name accepted. It leaves room under
// MySQL's 64-character identifier limit for the names of companion tables
// derived from it.
const MaxTableLength = 48

var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Options configures a Store. The zero value means all defaults.
type Options struct {
	// Table is the name of the outbox table in the database the *sql.DB
	// points at. Defaults to DefaultTable ("outbox"); room-service uses
	// "room_outbox". It must be a plain identifier (letters, digits,
	// underscores; not starting with a digit) of at most MaxTableLength
	// characters.
	Table string
}

// Store is the outbox.Store for MySQL 8.0+ and MariaDB 10.6+ (both have
// FOR UPDATE SKIP LOCKED). It is safe for concurrent use, by many
// goroutines and by many processes on one database.
//
// Times that decide delivery (due times, leases) are taken from the
// database clock, so instances whose clocks disagree behave the same.
type Store struct {
	db    *sql.DB
	table string // validated, unquoted
	q     queries

	// keyCursor is where the next ordered claim's walk over the keys
	// starts, so that every key gets its turn.
	cursorMu  sync.Mutex
	keyCursor string
}

var _ outbox.Store = (*Store)(nil)

// New returns a store on db. It does not touch the database; call Migrate
// once (say, at start-up) to create or upgrade the table. db may use any
// DSN settings: the store does not depend on parseTime, loc or
// interpolateParams (interpolateParams=true saves a round trip per
// statement and is recommended).
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysql store: db is nil")
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if len(opts.Table) > MaxTableLength || !tableNameRE.MatchString(opts.Table) {
		return nil, fmt.Errorf("mysql store: Table %q: must be letters, digits and underscores, not starting with a digit, at most %d characters", opts.Table, MaxTableLength)
	}
	return &Store{db: db, table: opts.Table, q: buildQueries(opts.Table)}, nil
}

// Table returns the name of the outbox table.
func (s *Store) Table() string { return s.table }

// Get returns the record with message ID id, or an error wrapping
// outbox.ErrNotFound. For a record that cannot be decoded it returns the
// fields it could read together with an error saying what is wrong.
func (s *Store) Get(ctx context.Context, id string) (outbox.Record, error) {
	row := s.db.QueryRowContext(ctx, s.q.get, id)
	r, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return outbox.Record{}, fmt.Errorf("mysql store: get %q: %w", id, outbox.ErrNotFound)
	}
	if err != nil {
		return outbox.Record{}, s.wrap("get", err)
	}
	if r.decodeErr != nil {
		return r.rec, fmt.Errorf("mysql store: get %q: %w", id, r.decodeErr)
	}
	return r.rec, nil
}

// wrap gives a database error the package prefix and, where it helps, a
// hint.
func (s *Store) wrap(op string, err error) error {
	if classify(err) == classNoTable {
		return fmt.Errorf("mysql store: %s: table %q does not exist (run Store.Migrate): %w", op, s.table, err)
	}
	return fmt.Errorf("mysql store: %s: %w", op, err)
}
