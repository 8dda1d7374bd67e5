package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
)

// MaxConsumerNameLength is the longest consumer name.
const MaxConsumerNameLength = storecore.MaxConsumerNameLength

// StartFrom says where a new consumer starts (backend.StartFrom).
type StartFrom = backend.StartFrom

// Where AddConsumer starts a consumer.
const (
	StartNow       = backend.StartNow
	StartBeginning = backend.StartBeginning
)

// Errors of the consumer registry (backend's).
var (
	ErrUnknownConsumer = backend.ErrUnknownConsumer
	ErrConsumerExists  = backend.ErrConsumerExists
)

// validConsumerName refuses a name that is not 1 to
// MaxConsumerNameLength letters, digits, '_', '.' or '-', not starting
// with '.' or '-'.
func validConsumerName(name string) error { return storecore.CheckConsumerName(dialect.What, name) }

// ConsumerStore is a named consumer of an outbox table: a backend.Store
// (and backend.Queue) with its own delivery state, so that its status,
// attempts, errors, leases, dead letters and per-key order are its own.
// Enqueue writes to the outbox, for every consumer.
type ConsumerStore struct {
	channel
}

var (
	_ backend.Store          = (*ConsumerStore)(nil)
	_ backend.SettleClaimer  = (*ConsumerStore)(nil)
	_ backend.HeadStartEnder = (*ConsumerStore)(nil)
	_ backend.Queue          = (*ConsumerStore)(nil)
)

// Consumer returns the store of the named consumer. It checks the name,
// not the registry: calls on a consumer that is not registered (see
// AddConsumer) fail with ErrUnknownConsumer.
func (s *Store) Consumer(name string) (*ConsumerStore, error) {
	if err := validConsumerName(name); err != nil {
		return nil, err
	}
	return &ConsumerStore{channel: channel{
		db: s.db, s: s, t: s.t, consumer: name,
		what: fmt.Sprintf("postgres store: consumer %q", name),
	}}, nil
}

// ConsumerQueue returns the Queue of the named consumer; "" is the
// default consumer, the Store itself.
func (s *Store) ConsumerQueue(name string) (backend.Queue, error) {
	return storecore.ConsumerQueue(s, name, s.Consumer)
}

// Name returns the consumer's name.
func (c *ConsumerStore) Name() string { return c.consumer }

// Enqueue writes msgs to the outbox, for every consumer (Store.Enqueue).
// A head start (opts.HeadStart) is this consumer's: its workers leave
// the messages to the writer's after-commit publish (a worker of this
// consumer's PublishNow) for that long, while every other consumer may
// deliver them at once. The consumer's records of them are written in
// tx, due when the head start ends; a consumer that is not registered
// gets them without one.
func (c *ConsumerStore) Enqueue(ctx context.Context, tx backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
	return storecore.ConsumerEnqueue(ctx, c.what, tx, opts, msgs, c.s.Enqueue, c.enqueueWithHeadStart, nil, nil)
}

// enqueueWithHeadStart is this consumer's part of an Enqueue with a head
// start (storecore.ConsumerEnqueue): it writes its records of the
// messages with ids, just written through tx, due after headStart.
func (c *ConsumerStore) enqueueWithHeadStart(ctx context.Context, tx backend.Execer, headStart time.Duration, ids []string) error {
	// Only messages this transaction wrote, past the consumer's start:
	// a state row, due when the head start ends, which the consumer's
	// walk of the log passes over. Ordered claims still wait for older
	// messages of their keys (keyGate).
	_, err := tx.ExecContext(ctx, c.t.render(`INSERT INTO {state} (consumer_id, seq, event_key, next_attempt_at)
SELECT k.id, m.seq, m.event_key, statement_timestamp() + $3 * interval '1 microsecond'
FROM {outbox} m JOIN {consumers} k ON k.name = $2 AND NOT k.removing AND m.seq > k.start_seq
WHERE m.event_id = ANY($1::text[]) AND m.xid = pg_current_xact_id()
ON CONFLICT DO NOTHING`), ids, c.consumer, headStart.Microseconds())
	if err != nil {
		return c.wrap("enqueue: the head start", err)
	}
	return nil
}

// Get returns the consumer's record of message id.
func (c *ConsumerStore) Get(ctx context.Context, id string) (outbox.Record, error) {
	return c.get(ctx, id)
}

// Claim leases due records of the consumer: its due state rows, and the
// next messages of its walk of the log (see Store.AddConsumer).
func (c *ConsumerStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	return c.claim(ctx, p)
}

// Settle records outcomes of the consumer's claimed records.
func (c *ConsumerStore) Settle(ctx context.Context, token string, outcomes []backend.Outcome) (backend.SettleResult, error) {
	return c.settle(ctx, token, outcomes)
}

// SettleAndClaim settles and claims in one transaction.
func (c *ConsumerStore) SettleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	return c.settleAndClaim(ctx, st, p)
}

// EndHeadStart makes those of ids that this consumer got with the head
// start their writer gave them (pending, never attempted, not leased,
// not yet due) due at once.
func (c *ConsumerStore) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	return c.endHeadStart(ctx, ids, `WITH u AS (
	UPDATE {state} s SET next_attempt_at = statement_timestamp() FROM {outbox} m
	WHERE s.consumer_id = {c} AND m.seq = s.seq AND m.event_id = ANY($1::text[]) AND s.status = 'pending' AND s.retry_count = 0
		AND s.lease_token = 0 AND s.next_attempt_at > statement_timestamp()
	RETURNING 1
)
SELECT count(*) FROM u`)
}

// resolve returns the channel's target: for a named consumer, with its
// id from the registry (ErrUnknownConsumer if it has none).
func (c *channel) resolve(ctx context.Context) (*target, error) {
	if c.consumer == "" {
		return c.t, nil
	}
	t := *c.t
	var removing bool
	_, err := redoing(ctx, func() (struct{}, error) {
		return struct{}{}, c.db.QueryRowContext(ctx, c.t.render("SELECT id, removing FROM {consumers} WHERE name = $1"), c.consumer).
			Scan(&t.consumerID, &removing)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && removing):
		return nil, fmt.Errorf("%s: %w", c.what, ErrUnknownConsumer)
	case err != nil:
		return nil, c.wrap("read the consumer registry", err)
	}
	return &t, nil
}

// horizonSQL is the horizon of the log's walk: the oldest transaction ID that
// may still be running in this database. Every transaction with a
// smaller ID has ended, so its messages are all visible (or rolled back)
// and no message of it can ever appear again: a consumer may be handed
// every message below the horizon, in (xid, seq) order, and move its
// cursor past them, without skipping one whose seq was taken before a
// later one committed. It is the snapshot's xmin, except that
// transactions known to run in other databases (which cannot write this
// table) are left out; when in doubt (pg_stat_activity hides the
// backend, or it ended in between) a transaction counts. Prepared
// transactions (PREPARE TRANSACTION) have no backend: pg_prepared_xacts
// says which database each belongs to, and those of other databases are
// left out too.
const horizonSQL = `(SELECT coalesce(min(x), pg_snapshot_xmax(pg_current_snapshot()))
	FROM pg_snapshot_xip(pg_current_snapshot()) AS x
	WHERE NOT EXISTS (
		SELECT 1 FROM pg_stat_activity a
		WHERE a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
			AND a.backend_xid IS NOT NULL
			AND a.backend_xid::text::bigint = (x::text::numeric % 4294967296)::bigint)
	AND NOT EXISTS (
		SELECT 1 FROM pg_prepared_xacts p
		WHERE p.database <> current_database()
			AND p.transaction::text::bigint = (x::text::numeric % 4294967296)::bigint))`

// AddConsumer registers a named consumer of the table, starting from
// now or from the beginning. It returns an error wrapping
// ErrConsumerExists if the name is taken. Run Migrate first.
//
// A consumer reads the log in the order of the writers' transaction IDs
// (xid8) and then seq, and only the messages of transactions that have
// ended: below the horizon (see docs/postgres-store.md), which is what
// makes its walk safe against commit order. A transaction left open in
// the same database holds every consumer's walk back until it ends.
func (s *Store) AddConsumer(ctx context.Context, name string, from StartFrom) error {
	if err := validConsumerName(name); err != nil {
		return err
	}
	if from != StartNow && from != StartBeginning {
		return fmt.Errorf("postgres store: add consumer %q: from %v: must be StartNow or StartBeginning", name, from)
	}
	n, err := execCount(ctx, s.db, s.t.render(`INSERT INTO {consumers} (name, start_seq, walked_xid, walked_seq)
SELECT $1, CASE WHEN $2 THEN 0 ELSE last.seq END, CASE WHEN $2 THEN '0'::xid8 ELSE `+horizonSQL+` END, 0
FROM (SELECT coalesce(max(seq), 0) AS seq FROM {outbox}) last
ON CONFLICT (name) DO NOTHING`), name, from == StartBeginning)
	if err != nil {
		return s.wrap("add consumer", err)
	}
	if n == 0 {
		return fmt.Errorf("postgres store: add consumer %q: %w", name, ErrConsumerExists)
	}
	return nil
}

// RemoveConsumer drops a named consumer and its delivery state, in one
// transaction, and returns how many of its records it deleted.
func (s *Store) RemoveConsumer(ctx context.Context, name string) (int, error) {
	if err := validConsumerName(name); err != nil {
		return 0, err
	}
	var n int64
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, s.t.render("DELETE FROM {consumers} WHERE name = $1 RETURNING id"), name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("postgres store: remove consumer %q: %w", name, ErrUnknownConsumer)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.t.render("DELETE FROM {ranges} WHERE consumer_id = $1"), id); err != nil {
			return err
		}
		n, err = execCount(ctx, tx, s.t.render("DELETE FROM {state} WHERE consumer_id = $1"), id)
		return err
	})
	if errors.Is(err, ErrUnknownConsumer) {
		return 0, err
	}
	if err != nil {
		return 0, s.wrap("remove consumer", err)
	}
	return int(n), nil
}

// Consumers lists the named consumers, by name. A consumer started
// from the beginning is backfilling while its walk has not yet passed
// the messages written before it was added.
func (s *Store) Consumers(ctx context.Context) ([]backend.ConsumerInfo, error) {
	return storecore.Consumers(ctx, s.db, s.wrapper("consumers"), s.t.render(`SELECT name, start_seq, walked_seq, created_at, removing,
	c.start_seq = 0 AND EXISTS (SELECT 1 FROM {outbox} o WHERE (o.xid, o.seq) > (c.walked_xid, c.walked_seq) AND o.created_at <= c.created_at)
FROM {consumers} c WHERE c.id <> 0 ORDER BY name`), time.Time.UTC)
}

// LastSeq returns the Seq of the last message written (0 for none).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	return storecore.One[int64](ctx, s.db, s.wrapper("last seq"), s.t.render("SELECT coalesce(max(seq), 0) FROM {outbox}"))
}

// Capabilities reports what the consumer's store does beyond
// backend.Store (see backend.Capabilities).
func (c *ConsumerStore) Capabilities() backend.Capabilities {
	caps := backend.Discover(c)
	caps.Outbox, caps.Consumer = c.s.opts.Table, c.consumer
	return caps
}
