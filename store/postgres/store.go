package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// DefaultTable is the table name when Options.Table is empty.
const DefaultTable = storecore.DefaultTable

// MaxTableLength is the longest table name accepted. It leaves room
// under PostgreSQL's 63-byte identifier limit for the companion tables
// and indexes derived from it.
const MaxTableLength = 40

// Options configures a Store. The zero value means all defaults.
type Options struct {
	// Table is the name of the outbox table in the database (and the
	// schema search_path) the *sql.DB points at. Defaults to DefaultTable
	// ("outbox"). It must be lower-case letters, digits and underscores,
	// not starting with a digit, of at most MaxTableLength characters.
	// The companion tables <Table>_consumers (where each consumer's walk
	// of the log stands), <Table>_ranges (batches out) and <Table>_state
	// (records that failed, are dead or wait) share the name. It is also the
	// LISTEN/NOTIFY channel (see Listener).
	Table string
	// PurgeDead makes retention (PurgePublished) treat dead letters like
	// published records. By default a dead letter is kept until an
	// operator requeues it.
	PurgeDead bool
	// MaxPayloadBytes is the largest Message.Payload Enqueue accepts; a
	// larger one fails with outbox.ErrInvalidMessage. Defaults to
	// DefaultMaxPayloadBytes (1 MiB); at most 64 MiB.
	MaxPayloadBytes int
	// MaxHeaderBytes bounds a message's headers as JSON; larger ones fail
	// with outbox.ErrInvalidMessage. Defaults to DefaultMaxHeaderBytes
	// (16 KiB); at most 1 MiB.
	MaxHeaderBytes int
	// MaxClaimBytes bounds the payload and header bytes one claim loads
	// into memory: a claim takes records while they fit, and always at
	// least one. Defaults to DefaultMaxClaimBytes (16 MiB).
	MaxClaimBytes int
	// DisableNotify stops Enqueue from calling pg_notify. By default
	// every Enqueue notifies the table's channel, delivered at commit, so
	// that a Listener wakes the workers at once. PostgreSQL serialises the
	// commits of notifying transactions on one lock: a service that
	// writes thousands of transactions a second and relies on polling may
	// want it off.
	DisableNotify bool
	// NotifyInterval, when positive, has Enqueue notify at most once per
	// interval from this Store; the Enqueues in between notify nothing.
	// PostgreSQL serialises the commits of notifying transactions on one
	// lock, held through each commit's WAL flush: at a few hundred
	// commits a second on a small server that lock, not the work, bounds
	// the rate (docs/postgres-store.md). The price is latency: a message
	// whose Enqueue did not notify is found by the workers that a
	// notification woke, if its transaction committed before they
	// looked, or by the next notification, or else when their
	// PollInterval comes round. Zero, the default, notifies on every
	// Enqueue; at most a minute. Ignored with DisableNotify.
	NotifyInterval time.Duration
}

// Defaults of the size options.
const (
	DefaultMaxPayloadBytes = storecore.DefaultMaxPayloadBytes
	DefaultMaxHeaderBytes  = storecore.DefaultMaxHeaderBytes
	DefaultMaxClaimBytes   = storecore.DefaultMaxClaimBytes
)

// dialect is what PostgreSQL allows of the options every store has.
// Table names are lower case, so that operators' unquoted SQL (which
// PostgreSQL folds to lower case) names the same table the store quotes.
var dialect = storecore.Dialect{
	What:           "postgres store",
	MaxTableLength: MaxTableLength,
	LowerCaseTable: true,
	MaxHeaderBytes: 1 << 20,
}

// checked returns o with its defaults filled in, and an error for each
// field that is wrong, naming the field and the value.
func (o Options) checked() (Options, error) {
	c := storecore.Common{Table: o.Table, MaxPayloadBytes: o.MaxPayloadBytes, MaxHeaderBytes: o.MaxHeaderBytes, MaxClaimBytes: o.MaxClaimBytes}.WithDefaults()
	o.Table, o.MaxPayloadBytes, o.MaxHeaderBytes, o.MaxClaimBytes = c.Table, c.MaxPayloadBytes, c.MaxHeaderBytes, c.MaxClaimBytes
	errs := c.Validate(dialect)
	if o.NotifyInterval < 0 || o.NotifyInterval > time.Minute {
		errs = append(errs, fmt.Errorf("postgres store: NotifyInterval %v: must be 0 (notify on every Enqueue) to 1m", o.NotifyInterval))
	}
	return o, errors.Join(errs...)
}

// Store is the backend.Store for PostgreSQL 13 and later, on
// database/sql with pgx's stdlib driver ("pgx"). It is safe for
// concurrent use, by many goroutines and by many processes on one
// database.
//
// Every time that decides delivery (due times, leases, ages) is the
// database server's clock (statement_timestamp()), so instances whose
// clocks disagree behave the same.
//
// The Store is the default consumer of its table; further consumers
// (Store.Consumer) read the same log at positions of their own.
type Store struct {
	channel
	opts Options
	// headStart is this Store's head start lease (a negative token):
	// Enqueue with a HeadStart leases the messages to it.
	headStart int64
	// created is when New made the Store; notified is when its Enqueue
	// last notified, as time since created plus 1 ns (0: never; for
	// NotifyInterval).
	created  time.Time
	notified atomic.Int64
	// afterEmptyClaim, when set (by tests only), runs between a claim
	// that took nothing and the look at what waits unread.
	afterEmptyClaim func()
}

// channel is one consumer's view of the outbox: where its delivery state
// lives (its target) and the methods that claim, settle and report it.
type channel struct {
	db *sql.DB
	// the outbox (parent) store; set for every channel.
	s    *Store
	t    *target
	what string
	// consumer is the named consumer's name; "" for the default one.
	consumer string
}

// headStart is the token of the writer's head start the channel's claims
// by ID may take: the Store's own, for the default consumer.
func (c *channel) headStart() int64 {
	if c.consumer == "" {
		return c.s.headStart
	}
	return 0
}

var _ storecore.Store = (*Store)(nil)

// New returns a store on db, which must use pgx's stdlib driver
// (sql.Open("pgx", dsn), or stdlib.OpenDBFromPool for a pgxpool.Pool).
// It does not touch the database; call Migrate once (say, at start-up) to
// create or upgrade the tables. Invalid options fail, naming the field.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("postgres store: db is nil")
	}
	opts, err := opts.checked()
	if err != nil {
		return nil, err
	}
	hs, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("postgres store: no randomness for the head start token: %w", err)
	}
	s := &Store{opts: opts, headStart: -hs, created: time.Now()}
	s.channel = channel{db: db, s: s, t: defaultTarget(opts.Table), what: "postgres store"}
	return s, nil
}

// Table returns the name of the outbox table.
func (s *Store) Table() string { return s.opts.Table }

// Name is Table: the outbox's name for operators (backend.Outbox).
func (s *Store) Name() string { return s.opts.Table }

// Channel returns the LISTEN/NOTIFY channel Enqueue notifies: the table
// name.
func (s *Store) Channel() string { return s.opts.Table }

// Get returns the record with message ID id, or an error wrapping
// outbox.ErrNotFound. For a record that cannot be decoded it returns the
// fields it could read together with an error saying what is wrong.
func (s *Store) Get(ctx context.Context, id string) (outbox.Record, error) {
	return s.get(ctx, id)
}

func (c *channel) get(ctx context.Context, id string) (outbox.Record, error) {
	t, err := c.resolve(ctx)
	if err != nil {
		return outbox.Record{}, err
	}
	rows, err := queryRecords(ctx, c.db, t.render(recordsSQL+" WHERE o.event_id = $1"), id)
	if err != nil {
		return outbox.Record{}, c.wrap("get", err)
	}
	return storecore.Found(c.what, id, rows, scanned.record)
}

// wrap gives a database error the channel's prefix and, where it helps, a
// hint; pgx's errors about a DSN that went astray, which can hold part of
// the password, are replaced (safeDriverErr).
func (c *channel) wrap(op string, err error) error {
	err = safeDriverErr(err)
	if classify(err) == ClassNoTable {
		return fmt.Errorf("%s: %s: table %q or its companion tables do not exist (run Store.Migrate): %w", c.what, op, c.s.opts.Table, err)
	}
	return fmt.Errorf("%s: %s: %w", c.what, op, err)
}

// wrapper is wrap of operation op, for storecore.InTx.
func (c *channel) wrapper(op string) func(error) error {
	return func(err error) error { return c.wrap(op, err) }
}

// execCount runs a statement through db and returns how many rows it
// changed.
func execCount(ctx context.Context, db backend.Execer, q string, args ...any) (int64, error) {
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// target names a consumer's tables and renders its statements.
type target struct {
	outbox, consumers, state, ranges string // quoted
	// consumerID is the consumer's id: 0 for the default consumer.
	consumerID int64
}

func defaultTarget(table string) *target { return newTarget(table, 0) }

func newTarget(table string, consumer int64) *target {
	return &target{
		outbox:     quote(table),
		consumers:  quote(table + "_consumers"),
		state:      quote(table + "_state"),
		ranges:     quote(table + "_ranges"),
		consumerID: consumer,
	}
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// render fills in a statement's placeholders: the tables {outbox}
// {consumers} {state} {ranges}, {horizon} (horizonSQL), and
// {logcols}/{statecols}, the record's columns (see scanRecord) of a log
// row o, and of a state row s with its log row o.
//
// Every statement of the store goes through render, and
// testdata/statements.sql has each one as it runs, under the function
// that renders it (TestStatementsReadWhole keeps it current): read the
// SQL there, placeholders filled in.
func (t *target) render(q string) string {
	s := strings.NewReplacer(
		"{logcols}", logCols, "{statecols}", stateCols,
		"{outbox}", t.outbox, "{consumers}", t.consumers, "{state}", t.state, "{ranges}", t.ranges,
		"{horizon}", horizonSQL, "{c}", strconv.FormatInt(t.consumerID, 10),
	).Replace(q)
	if log := statementLog.Load(); log != nil {
		(*log)(s)
	}
	return s
}

// statementLog, when set (by TestStatementsReadWhole only), is told every
// statement render fills in.
var statementLog atomic.Pointer[func(stmt string)]

// Capabilities reports what the Store does beyond backend.Store: one
// transaction to settle and claim, the writer's head start (ordered too)
// and its early end, and retention.
func (s *Store) Capabilities() backend.Capabilities {
	c := backend.Discover(s)
	c.Outbox = s.opts.Table
	return c
}
