package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/internal/storecore"
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
			db: s.db, table: s.table, what: fmt.Sprintf("mysql store: consumer %q", name), t: s.t,
			consumer: name, purgeDead: s.purgeDead, maxClaimBytes: s.maxClaimBytes, gapTimeout: s.gapTimeout,
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
	return storecore.ConsumerQueue(s, name, s.Consumer)
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
	return storecore.ConsumerEnqueue(ctx, c.what, tx, opts, msgs, c.parent.Enqueue, c.enqueueWithHeadStart, nil, c.wrapper("enqueue"))
}

// enqueueWithHeadStart is this consumer's part of an Enqueue with a head
// start (storecore.ConsumerEnqueue): it writes its state rows of the
// messages with ids, just written through tx, due after headStart: its walk
// passes them over, and its claims take them when they are due. Only
// messages past the consumer's start get one.
func (c *ConsumerStore) enqueueWithHeadStart(ctx context.Context, tx backend.Execer, headStart time.Duration, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), headStartRowsBatch)
		args := append([]any{headStart.Microseconds(), c.name}, anyArgs(ids[:n])...)
		if _, err := c.t.renderList(`INSERT IGNORE INTO {state} (consumer_id, id, event_key, next_attempt_at)
SELECT k.id, o.id, o.event_key, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
FROM {outbox} o JOIN {consumers} k ON k.name = ? AND k.removing = 0 AND o.id > k.start_seq
WHERE o.event_id IN ({list})`, n, args...).exec(ctx, tx); err != nil {
			return c.wrap("enqueue: the head start", err)
		}
		ids = ids[n:]
	}
	return nil
}

// headStartRowsBatch is how many messages one statement of the head
// start names.
const headStartRowsBatch = 1000

// Get returns the message with ID id as this consumer sees it: its own
// status, attempts and last error. A message written before the
// consumer started is ErrNotFound.
func (c *ConsumerStore) Get(ctx context.Context, id string) (outbox.Record, error) {
	return c.get(ctx, id)
}

// EndHeadStart makes those of ids whose head start this consumer's
// Enqueue gave (pending, never attempted, not leased, not yet due) due
// at once. It returns how many it changed.
func (c *ConsumerStore) EndHeadStart(ctx context.Context, ids []string) (int, error) {
	if ok, err := storecore.CheckEndHeadStart(c.what, ids); !ok {
		return 0, err
	}
	t, err := c.resolve(ctx)
	if err != nil {
		return 0, err
	}
	n, err := execRetrying(ctx, c.db, t.renderList(`UPDATE {state} s JOIN {outbox} o ON o.id = s.id
SET s.next_attempt_at = UTC_TIMESTAMP(6)
WHERE s.consumer_id = {c} AND o.event_id IN ({list}) AND s.status = 'pending' AND s.retry_count = 0 AND s.lease_token = 0
	AND s.next_attempt_at > UTC_TIMESTAMP(6)`, len(ids), anyArgs(ids)...))
	if err != nil {
		return 0, c.wrap("end head start", err)
	}
	return int(n), nil
}

// Capabilities reports what the consumer's store does beyond
// backend.Store: one transaction to settle and claim. (Retention and the
// writer's head start belong to the Store.)
func (c *ConsumerStore) Capabilities() backend.Capabilities {
	caps := backend.Discover(c)
	caps.Outbox, caps.Consumer = c.table, c.name
	return caps
}
