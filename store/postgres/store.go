package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// DefaultTable is the table name when Options.Table is empty.
const DefaultTable = "outbox"

// MaxTableLength is the longest table name accepted. It leaves room
// under PostgreSQL's 63-byte identifier limit for the companion tables
// and indexes derived from it.
const MaxTableLength = 40

// Table names are lower case, so that operators' unquoted SQL (which
// PostgreSQL folds to lower case) names the same table the store quotes.
var tableNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Options configures a Store. The zero value means all defaults.
type Options struct {
	// Table is the name of the outbox table in the database (and the
	// schema search_path) the *sql.DB points at. Defaults to DefaultTable
	// ("outbox"). It must be lower-case letters, digits and underscores,
	// not starting with a digit, of at most MaxTableLength characters.
	// Named consumers keep their state in the companion tables
	// <Table>_consumers and <Table>_consumption. It is also the
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
}

// Defaults of the size options.
const (
	DefaultMaxPayloadBytes = 1 << 20
	DefaultMaxHeaderBytes  = 16 << 10
	DefaultMaxClaimBytes   = 16 << 20
)

const (
	payloadBytesCeiling = 64 << 20
	headerBytesCeiling  = 1 << 20
)

func (o Options) withDefaults() Options {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxClaimBytes == 0 {
		o.MaxClaimBytes = DefaultMaxClaimBytes
	}
	return o
}

// validate checks options with defaults filled in; each error names the
// field and the value.
func (o Options) validate() error {
	var errs []error
	if len(o.Table) > MaxTableLength || !tableNameRE.MatchString(o.Table) {
		errs = append(errs, fmt.Errorf("postgres store: Table %q: must be lower-case letters, digits and underscores, not starting with a digit, at most %d characters", o.Table, MaxTableLength))
	}
	if o.MaxPayloadBytes < 0 || o.MaxPayloadBytes > payloadBytesCeiling {
		errs = append(errs, fmt.Errorf("postgres store: MaxPayloadBytes %d: must be 1 to %d (0 for the default)", o.MaxPayloadBytes, payloadBytesCeiling))
	}
	if o.MaxHeaderBytes < 0 || o.MaxHeaderBytes > headerBytesCeiling {
		errs = append(errs, fmt.Errorf("postgres store: MaxHeaderBytes %d: must be 1 to %d (0 for the default)", o.MaxHeaderBytes, headerBytesCeiling))
	}
	if o.MaxClaimBytes < 0 {
		errs = append(errs, fmt.Errorf("postgres store: MaxClaimBytes %d: must not be negative (0 for the default)", o.MaxClaimBytes))
	}
	return errors.Join(errs...)
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
// The Store is the default consumer of its table: it delivers through
// the status columns of the outbox table itself. Further consumers
// (Store.Consumer) have state of their own.
type Store struct {
	channel
	opts Options
	// headStart is this Store's head start lease (a negative token):
	// Enqueue with a HeadStart leases the messages to it.
	headStart int64

	// handOverMu serialises this process's hand-overs per consumer (the
	// database serialises them across processes).
	handOverMu sync.Mutex
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

	// keyCursor is where the next ordered claim's walk over the keys
	// starts, so that every key gets its turn.
	cursorMu  sync.Mutex
	keyCursor []byte
}

var (
	_ backend.Store           = (*Store)(nil)
	_ backend.SettleClaimer   = (*Store)(nil)
	_ backend.HeadStartLeaser = (*Store)(nil)
	_ backend.HeadStartEnder  = (*Store)(nil)
	_ backend.Outbox          = (*Store)(nil)
	_ backend.Purger          = (*Store)(nil)
)

// New returns a store on db, which must use pgx's stdlib driver
// (sql.Open("pgx", dsn), or stdlib.OpenDBFromPool for a pgxpool.Pool).
// It does not touch the database; call Migrate once (say, at start-up) to
// create or upgrade the tables. Invalid options fail, naming the field.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("postgres store: db is nil")
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	hs, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("postgres store: no randomness for the head start token: %w", err)
	}
	s := &Store{opts: opts, headStart: -hs}
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
	q := t.render("SELECT {cols} FROM {from} WHERE {scope}{m}.event_id = $1")
	if t.consumerID != 0 {
		// A message not yet handed over to the consumer is pending for it,
		// due since it was written. One statement reads both, so that a
		// hand-over committing meanwhile cannot hide it.
		q += t.render(` UNION ALL
SELECT m.seq, m.event_id, m.event_key, m.event_type, m.payload, m.headers, m.occurred_at, m.created_at,
	'pending', 0, '', m.created_at, NULL::timestamptz
FROM {outbox} m JOIN {consumers} c ON c.id = $2
WHERE m.event_id = $1 AND m.seq > c.start_seq AND (m.xid, m.seq) > (c.cursor_xid, c.cursor_seq)
	AND NOT EXISTS (SELECT 1 FROM {consumption} x WHERE x.consumer_id = c.id AND x.seq = m.seq)`)
	}
	args := []any{id}
	if t.consumerID != 0 {
		args = append(args, t.consumerID)
	}
	rows, err := queryRecords(ctx, c.db, q, args...)
	if err != nil {
		return outbox.Record{}, c.wrap("get", err)
	}
	if len(rows) == 0 {
		return outbox.Record{}, fmt.Errorf("%s: get %q: %w", c.what, id, outbox.ErrNotFound)
	}
	if rows[0].err != nil {
		return rows[0].rec, fmt.Errorf("%s: get %q: %w", c.what, id, rows[0].err)
	}
	return rows[0].rec, nil
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

// target says where a channel's delivery state lives and renders its
// statements. The state table is aliased s; the message columns are on
// alias m (the outbox table, joined for a named consumer) or on s itself.
type target struct {
	outbox, consumers, consumption string // quoted
	// consumerID is the named consumer's id (0: the default consumer).
	consumerID int64
	startSeq   int64
}

func defaultTarget(table string) *target {
	return &target{
		outbox:      quote(table),
		consumers:   quote(table + "_consumers"),
		consumption: quote(table + "_consumption"),
	}
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// render fills in a statement's placeholders:
//
//	{outbox} {consumers} {consumption}  the tables
//	{state}  the state table, {from} it with the message columns joined
//	{scope}  "s.consumer_id = N AND " for a named consumer, else ""
//	{sc}     the same for another alias of the state table: {sc:x}
//	{older:x} for a named consumer, " AND NOT EXISTS (…)": no older
//	         message of the key of alias x waits for hand-over (olderWaiting)
//	{m}      the alias of the message columns
//	{cols}   the record's columns (see scanRecord)
func (t *target) render(q string) string {
	named := t.consumerID != 0
	state, from, scope, m := t.outbox, t.outbox+" s", "", "s"
	if named {
		state = t.consumption
		from = t.consumption + " s JOIN " + t.outbox + " m ON m.seq = s.seq"
		scope = fmt.Sprintf("s.consumer_id = %d AND ", t.consumerID)
		m = "m"
	}
	updfrom, updfromfirst, updjoin := "", "", ""
	if named {
		updfrom, updfromfirst, updjoin = ", {outbox} m", "FROM {outbox} m", " AND m.seq = s.seq"
	}
	q = strings.NewReplacer(
		"{cols}", recordCols,
		"{from}", from,
		"{updfrom}", updfrom,
		"{updfromfirst}", updfromfirst,
		"{updjoin}", updjoin,
	).Replace(q)
	// {oid:x} is the event ID of alias x of the state table.
	q = replaceAlias(q, "{oid:", func(alias string) string {
		if named {
			return "(SELECT xo.event_id FROM {outbox} xo WHERE xo.seq = " + alias + ".seq)"
		}
		return alias + ".event_id"
	})
	// {older:x} holds back the record of alias x of the state table while
	// an older message of its key waits for hand-over (see olderWaiting).
	q = replaceAlias(q, "{older:", func(alias string) string {
		if named {
			return fmt.Sprintf(olderWaiting, alias, t.consumerID)
		}
		return ""
	})
	// {sc:x} scopes another alias x of the state table.
	q = replaceAlias(q, "{sc:", func(alias string) string {
		if named {
			return fmt.Sprintf("%s.consumer_id = %d AND ", alias, t.consumerID)
		}
		return ""
	})
	return strings.NewReplacer(
		"{outbox}", t.outbox,
		"{consumers}", t.consumers,
		"{consumption}", t.consumption,
		"{state}", state,
		"{scope}", scope,
		"{m}", m,
	).Replace(q)
}

// olderWaiting (for alias %[1]s of a named consumer's state table, and
// the consumer's id %[2]d) is true while a message of the record's key
// with a smaller seq is still to be handed over to the consumer. A key's
// messages are in seq order, but the hand-over moves messages in the
// order of their writers' transaction IDs, only below the horizon and at
// most handOverBatch at a time: a writer that took its transaction ID
// early and the key's row lock late writes the key's next message under
// an older ID, and it can be handed over before the key's message it
// follows. An ordered claim takes a key's head only when this is false.
// It reads the {prefix}_key_xid index: the key's messages not yet handed
// over, normally none.
const olderWaiting = ` AND NOT EXISTS (SELECT 1 FROM {outbox} ow JOIN {consumers} cw ON cw.id = %[2]d
	WHERE ow.event_key = %[1]s.event_key AND (ow.xid, ow.seq) > (cw.cursor_xid, cw.cursor_seq)
		AND ow.seq > cw.start_seq AND ow.seq < %[1]s.seq)`

// recordCols are the columns scanRecord reads.
const recordCols = "{m}.seq, {m}.event_id, {m}.event_key, {m}.event_type, {m}.payload, {m}.headers, {m}.occurred_at, {m}.created_at, " +
	"s.status, s.retry_count, s.last_error, s.next_attempt_at, s.finished_at"

// replaceAlias replaces every {prefix…alias} in q with fn(alias).
func replaceAlias(q, prefix string, fn func(alias string) string) string {
	for {
		i := strings.Index(q, prefix)
		if i < 0 {
			return q
		}
		j := strings.Index(q[i:], "}")
		q = q[:i] + fn(q[i+len(prefix):i+j]) + q[i+j+1:]
	}
}
