package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/mysqlerr"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// DefaultTable is the table name when Options.Table is empty.
const DefaultTable = storecore.DefaultTable

// MaxTableLength is the longest table name accepted. It leaves room under
// MySQL's 64-character identifier limit for the names of companion tables
// derived from it.
const MaxTableLength = 48

// Options configures a Store. The zero value means all defaults.
type Options struct {
	// Table is the name of the outbox table in the database the *sql.DB
	// points at. Defaults to DefaultTable ("outbox"). It must be a plain
	// identifier (letters, digits, underscores; not starting with a
	// digit) of at most MaxTableLength characters. Named consumers keep
	// their state in the companion tables <Table>_consumers and
	// <Table>_consumption.
	Table string
	// PurgeDead makes retention (PurgePublished) treat dead letters like
	// published records: a message is purged once every consumer has
	// published it or given up on it, and older than the retention age.
	// By default a dead letter is kept, and with it its message, until an
	// operator requeues it.
	PurgeDead bool
	// MaxPayloadBytes is the largest Message.Payload Enqueue accepts; a
	// larger one fails with outbox.ErrInvalidMessage. Defaults to
	// DefaultMaxPayloadBytes (1 MiB); at most 64 MiB. The server's
	// max_allowed_packet must hold a message this large.
	MaxPayloadBytes int
	// MaxHeaderBytes bounds a message's headers as stored (a JSON
	// object); larger ones fail with outbox.ErrInvalidMessage. Defaults
	// to DefaultMaxHeaderBytes (16 KiB); at most 65,535 (the column's
	// size).
	MaxHeaderBytes int
	// MaxClaimBytes bounds the payload and header bytes one claim loads
	// into memory: a claim takes records while they fit, and always at
	// least one (so a claim holds at most MaxClaimBytes plus one message).
	// Defaults to DefaultMaxClaimBytes (16 MiB).
	MaxClaimBytes int
	// GapTimeout is how long a consumer's walk waits at an id missing
	// from the log, with a later one committed and no transaction
	// holding it (a rolled-back or failed insert), before it passes it.
	// A transaction still open holds the walk however long it stays
	// open; GapTimeout covers the moment between an INSERT taking its
	// id and writing its row, when nothing shows it (LOG-DESIGN.md,
	// "Holes"). A row that appears in a hole after that is still
	// delivered, late. Defaults to DefaultGapTimeout (1s); at most 1m.
	GapTimeout time.Duration
}

// Defaults of the size options.
const (
	DefaultMaxPayloadBytes = storecore.DefaultMaxPayloadBytes
	DefaultMaxHeaderBytes  = storecore.DefaultMaxHeaderBytes
	DefaultMaxClaimBytes   = storecore.DefaultMaxClaimBytes
)

// dialect is what MySQL allows of the options every store has.
var dialect = storecore.Dialect{
	What:           "mysql store",
	MaxTableLength: MaxTableLength,
	MaxHeaderBytes: 65535, // the headers column is a TEXT
}

// checked returns o with its defaults filled in, and an error for each
// field that is wrong, naming the field and the value.
func (o Options) checked() (Options, error) {
	c := storecore.Common{Table: o.Table, MaxPayloadBytes: o.MaxPayloadBytes, MaxHeaderBytes: o.MaxHeaderBytes, MaxClaimBytes: o.MaxClaimBytes}.WithDefaults()
	o.Table, o.MaxPayloadBytes, o.MaxHeaderBytes, o.MaxClaimBytes = c.Table, c.MaxPayloadBytes, c.MaxHeaderBytes, c.MaxClaimBytes
	o.GapTimeout = cmp.Or(o.GapTimeout, DefaultGapTimeout)
	errs := c.Validate(dialect)
	if o.GapTimeout < 0 || o.GapTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("mysql store: GapTimeout %v: must be 1µs to 1m (0 for the default)", o.GapTimeout))
	}
	return o, errors.Join(errs...)
}

// Store is the backend.Store for MySQL 8.0+ and MariaDB 10.6+. It is
// safe for concurrent use, by many goroutines and by many processes on
// one database.
//
// Times that decide delivery (due times, leases) are taken from the
// database clock, so instances whose clocks disagree behave the same.
//
// The outbox is a log that each consumer reads past a position of its
// own (LOG-DESIGN.md): the Store is the default consumer, and further
// consumers (Store.Consumer) read the same log.
type Store struct {
	channel
	// maxPayload and maxHeaders bound what Enqueue accepts.
	maxPayload, maxHeaders int

	// purgeCursor is where the retention sweep goes on.
	purgeMu     sync.Mutex
	purgeCursor uint64
}

// channel is one consumer's view of the outbox and the methods that
// claim, settle and report its delivery. The Store is one (the default
// consumer) and every ConsumerStore another.
type channel struct {
	db    *sql.DB
	table string // the outbox table, validated, unquoted
	// what prefixes errors: "mysql store" or `mysql store: consumer "x"`.
	what string
	// t is the default consumer's target; a named consumer's is named,
	// once resolve has read its id.
	t         *target
	consumer  string
	targetsMu sync.Mutex
	named     *target
	purgeDead bool
	// maxClaimBytes bounds the payload and header bytes of one claim.
	maxClaimBytes int
	// gapTimeout is Options.GapTimeout.
	gapTimeout time.Duration
	// netAt is when the claims last looked for late arrivals in the
	// holes the consumer passed (lateArrivals), in Unix nanoseconds.
	netAt atomic.Int64
	// late counts the late arrivals found (LateArrivals).
	late atomic.Int64
}

// readCommitted is the isolation of every transaction of the store:
// under REPEATABLE READ a claim's range scan would take next-key (gap)
// locks, and a writer inserting a new due record into that gap would wait
// for the claim to commit (TestClaimDoesNotBlockWriters). The store's
// other transactions (hand-over, requeue, retention, the registry) use it
// too: each locks the rows it decides on explicitly.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

var _ storecore.Store = (*Store)(nil)

// New returns a store on db. It does not touch the database; call Migrate
// once (say, at start-up) to create or upgrade the table. db may use any
// DSN settings: the store does not depend on parseTime, loc or
// interpolateParams (interpolateParams=true saves a round trip per
// statement and is recommended).
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysql store: db is nil")
	}
	opts, err := opts.checked()
	if err != nil {
		return nil, err
	}
	return &Store{
		channel: channel{
			db: db, table: opts.Table, what: "mysql store", t: newTarget(opts.Table, 0, opts.PurgeDead),
			purgeDead: opts.PurgeDead, maxClaimBytes: opts.MaxClaimBytes, gapTimeout: opts.GapTimeout,
		},
		maxPayload: opts.MaxPayloadBytes,
		maxHeaders: opts.MaxHeaderBytes,
	}, nil
}

// Table returns the name of the outbox table.
func (s *Store) Table() string { return s.table }

// Name is Table: the outbox's name for operators (backend.Outbox).
func (s *Store) Name() string { return s.table }

// Get returns the record with message ID id, or an error wrapping
// outbox.ErrNotFound. For a record that cannot be decoded it returns the
// fields it could read together with an error saying what is wrong.
func (s *Store) Get(ctx context.Context, id string) (outbox.Record, error) {
	return s.get(ctx, id)
}

// wrap gives a database error the channel's prefix and, where it helps, a
// hint.
func (s *channel) wrap(op string, err error) error {
	if mysqlerr.Classify(err) == mysqlerr.NoTable {
		return fmt.Errorf("%s: %s: table %q or its companion tables do not exist (run Store.Migrate): %w", s.what, op, s.table, err)
	}
	return fmt.Errorf("%s: %s: %w", s.what, op, err)
}

// wrapper is wrap of operation op, for storecore.InTx.
func (s *channel) wrapper(op string) func(error) error {
	return func(err error) error { return s.wrap(op, err) }
}

// Capabilities reports what the Store does beyond backend.Store: one
// transaction to settle and claim, the writer's head start (ordered too)
// and its early end, and retention.
func (s *Store) Capabilities() backend.Capabilities {
	c := backend.Discover(s)
	c.Outbox = s.table
	return c
}
