package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Consumer returns the store of the named consumer, for outbox.NewWorker:
// a worker built on it delivers that consumer's records only. It does
// not touch the database; the consumer must have been added
// (AddConsumer) before its first claim.
func (s *Store) Consumer(name string) (*ConsumerStore, error) {
	if err := validConsumerName(name); err != nil {
		return nil, err
	}
	return &ConsumerStore{
		channel: channel{
			db: s.db, table: s.table, what: fmt.Sprintf("mysql store: consumer %q", name), t: newTarget(s.table, name, s.purgeDead),
			maxClaimBytes: s.maxClaimBytes,
		},
		parent: s,
		name:   name,
	}, nil
}

// ConsumerStore is the backend.Store of one named consumer of a table. It
// shares the messages with every other consumer and keeps its own
// delivery state: Claim, Settle, Requeue, RequeueDead, CountDead and
// Stats see only this consumer's records. Enqueue writes messages for
// every consumer, as Store.Enqueue does. Retention belongs to the Store
// (PurgePublished), which waits for every consumer.
type ConsumerStore struct {
	channel
	parent *Store
	name   string
}

var (
	_ backend.Queue         = (*ConsumerStore)(nil)
	_ backend.SettleClaimer = (*ConsumerStore)(nil)
)

// ConsumerQueue returns the Queue of the named consumer of the table: its
// ConsumerStore, or the Store itself for "" (backend.Outbox).
func (s *Store) ConsumerQueue(name string) (backend.Queue, error) {
	if name == "" {
		return s, nil
	}
	return s.Consumer(name)
}

// Name returns the consumer's name.
func (c *ConsumerStore) Name() string { return c.name }

// Enqueue is Store.Enqueue: the messages are for every consumer. A head
// start (opts.HeadStart) is this consumer's: its workers leave the
// messages to the writer's after-commit publish (a worker of this
// consumer's PublishNow) for that long, while every other consumer,
// the default one included, may deliver them at once. The consumer's
// records of them are written in tx, due when the head start ends; a
// consumer that is not registered, or still backfilling below them,
// gets them without one.
func (c *ConsumerStore) Enqueue(ctx context.Context, tx backend.Execer, opts *backend.EnqueueOptions, msgs ...backend.Message) error {
	if opts == nil || opts.HeadStart == 0 || len(msgs) == 0 {
		return c.parent.Enqueue(ctx, tx, opts, msgs...)
	}
	if opts.HeadStart < 0 {
		return fmt.Errorf("%s: enqueue: HeadStart %v: must not be negative", c.what, opts.HeadStart)
	}
	db, ok := tx.(*sql.DB)
	if !ok {
		return c.enqueueWithHeadStart(ctx, tx, opts.HeadStart, msgs)
	}
	own, err := db.BeginTx(ctx, nil) // the messages and the consumer's records commit together
	if err != nil {
		return c.wrap("enqueue", err)
	}
	defer func() { _ = own.Rollback() }()
	if err := c.enqueueWithHeadStart(ctx, own, opts.HeadStart, msgs); err != nil {
		return err
	}
	if err := own.Commit(); err != nil {
		return c.wrap("enqueue", err)
	}
	return nil
}

// enqueueWithHeadStart writes msgs to the outbox, due at once, and this
// consumer's records of them, due after headStart, through tx.
func (c *ConsumerStore) enqueueWithHeadStart(ctx context.Context, tx backend.Execer, headStart time.Duration, msgs []backend.Message) error {
	if err := c.parent.Enqueue(ctx, tx, nil, msgs...); err != nil {
		return err
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	for len(ids) > 0 {
		n := min(len(ids), headStartRowsBatch)
		if _, err := headStartRowsSQL(c.t, c.name, headStart, ids[:n]).exec(ctx, tx); err != nil {
			return c.wrap("enqueue: the head start", err)
		}
		ids = ids[n:]
	}
	return nil
}

// headStartRowsBatch is how many messages one headStartRowsSQL names.
const headStartRowsBatch = 1000

// headStartRowsSQL writes consumer name's rows of the messages ids, due
// headStart from now: those past its start and not below a backfill in
// progress, as handOverSQL would hand them over. The hand-over finds
// them there and leaves them as they are.
func headStartRowsSQL(t *target, name string, headStart time.Duration, ids []string) statement {
	args := []any{headStart.Microseconds(), name}
	for _, id := range ids {
		args = append(args, id)
	}
	return t.renderList("INSERT INTO {consumption} (consumer, msg_id, event_id, event_key, event_type, created_at, next_attempt_at) SELECT k.name, o.id, o.event_id, o.event_key, o.event_type, o.created_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND FROM {outbox} o JOIN {consumers} k ON k.name = ? AND k.removing = 0 AND k.start_seq <= o.id AND (k.backfill_cursor IS NULL OR o.id <= k.backfill_cursor) WHERE o.event_id IN ({list}) ON DUPLICATE KEY UPDATE msg_id = msg_id", len(ids), args...)
}

// Get returns the message with ID id as this consumer sees it: its own
// status, attempts and last error. A message that is to reach the
// consumer but has not been handed over yet is pending with no attempts.
// A message the consumer is not to get is ErrNotFound.
func (c *ConsumerStore) Get(ctx context.Context, id string) (outbox.Record, error) {
	rec, err := c.get(ctx, id)
	if !errors.Is(err, outbox.ErrNotFound) {
		return rec, err
	}
	msg, err := c.parent.get(ctx, id)
	if err != nil {
		if errors.Is(err, outbox.ErrNotFound) {
			return outbox.Record{}, fmt.Errorf("%s: get %q: %w", c.what, id, outbox.ErrNotFound)
		}
		return msg, err
	}
	var start int64
	switch err := startSQL(c.t, c.name).queryRow(ctx, c.db).Scan(&start); {
	case errors.Is(err, sql.ErrNoRows):
		return outbox.Record{}, fmt.Errorf("%s: get %q: %w", c.what, id, ErrUnknownConsumer)
	case err != nil:
		return outbox.Record{}, c.wrap("get", err)
	case msg.Seq < start:
		return outbox.Record{}, fmt.Errorf("%s: get %q: written before the consumer started: %w", c.what, id, outbox.ErrNotFound)
	}
	// Not handed over yet: pending for the consumer, due since it was
	// written.
	msg.Status, msg.Attempts, msg.LastError = outbox.StatusPending, 0, ""
	msg.NextAttemptAt, msg.PublishedAt = msg.EnqueuedAt, time.Time{}
	return msg, nil
}

// Claim is Store.Claim for this consumer. It first hands the oldest
// messages not yet handed over to the named consumers (500 of them, or
// p.Limit if that is more), and, while this consumer is backfilling, the
// next p.Limit retained messages; each in a short transaction of its own.
// It fails with ErrUnknownConsumer if the consumer is not registered.
func (c *ConsumerStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	if err := c.prepareClaim(ctx, p); err != nil {
		return backend.Batch{}, err
	}
	return c.channel.Claim(ctx, p)
}

// SettleAndClaim is Store.SettleAndClaim for this consumer, with the
// hand-over of Claim before it.
func (c *ConsumerStore) SettleAndClaim(ctx context.Context, st backend.Settlement, p backend.ClaimParams) (backend.SettleResult, backend.Batch, error) {
	if err := c.prepareClaim(ctx, p); err != nil {
		return backend.SettleResult{}, backend.Batch{}, err
	}
	return c.channel.SettleAndClaim(ctx, st, p)
}

// prepareClaim hands messages over to the named consumers, and the next
// ones of a backfill to this one, before a claim.
func (c *ConsumerStore) prepareClaim(ctx context.Context, p backend.ClaimParams) error {
	if err := validateClaim(p); err != nil {
		return err
	}
	backfilling, err := c.parent.handOver(ctx, c.name, max(p.Limit, handOverBatch))
	if err != nil {
		if errors.Is(err, ErrUnknownConsumer) {
			return fmt.Errorf("%s: claim: %w", c.what, err)
		}
		return c.wrap("claim: hand over", err)
	}
	if backfilling && len(p.IDs) == 0 {
		if err := c.parent.backfill(ctx, c.name, p.Limit); err != nil {
			return c.wrap("claim: backfill", err)
		}
	}
	return nil
}

// handOverBatch is the fewest messages one claim hands over: more than a
// claim takes, so that the hand-over stays ahead of the claims, and an
// after-commit claim finds its messages handed over unless a backlog of
// that size waits before them.
const handOverBatch = 500

// startSQL reads the first message consumer name gets without backfill.
func startSQL(t *target, name string) statement {
	return t.render("SELECT start_seq FROM {consumers} WHERE name = ? AND removing = 0", name)
}
