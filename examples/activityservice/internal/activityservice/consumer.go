package activityservice

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxrelay/outboxrelay/inbox"
	"github.com/outboxrelay/outboxrelay/internal/ctxwait"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// The outcomes of a delivery, the outcome label of
// activity_deliveries_total.
const (
	outcomeProcessed = "processed"  // applied, through the inbox
	outcomeDuplicate = "duplicate"  // the inbox had it: absorbed
	outcomeIgnored   = "ignored"    // a room event type activity does not use
	outcomeUnknown   = "unknown"    // an event type activity does not know
	outcomeMalformed = "malformed"  // cannot be decoded or out of range
	outcomeFailed    = "failed"     // processing failed: delivered again
	outcomeAckFailed = "ack_failed" // applied, the ack was lost: comes again, absorbed
)

// roomConsumer reads room-service's stream with a durable pull consumer
// and explicit acknowledgements: a message is acknowledged only after
// the inbox's transaction has committed (or it is one that will never be
// applied: ignored, unknown, malformed); a failure asks for it again
// after RetryDelay, and a killed instance's messages come back after
// AckWait.
type roomConsumer struct {
	cons       jetstream.Consumer
	inbox      inbox.Inbox
	proj       *projector
	publisher  *outbox.Worker // the after-commit publish of level-ups
	batch      int
	fetchWait  time.Duration
	retryDelay time.Duration
	// handleTimeout bounds one message's processing; it is below AckWait.
	handleTimeout time.Duration
	deliveries    *prometheus.CounterVec
	log           *slog.Logger
}

// consumerConfig is the durable consumer activity-service keeps on the
// rooms stream.
func consumerConfig(r RoomsConfig) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       r.Durable,
		Description:   "activity-service: per-user activity from room events",
		FilterSubject: r.SubjectPrefix + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.AckWait,
		MaxDeliver:    -1, // a message is never dropped: failures are the database's, and pass
		MaxAckPending: r.MaxAckPending,
	}
}

// run pulls and handles messages until ctx ends. The message in hand is
// finished (its transaction and its ack); the rest of its batch is
// handed back (nak) for whoever pulls next.
func (c *roomConsumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		batch, err := c.cons.Fetch(c.batch, jetstream.FetchMaxWait(c.fetchWait))
		if err != nil {
			c.log.WarnContext(ctx, "rooms: fetch failed; trying again", slog.Any("error", err))
			c.pause(ctx)
			continue
		}
		for msg := range batch.Messages() {
			if ctx.Err() != nil {
				_ = msg.Nak()
				continue
			}
			c.handle(ctx, msg)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			c.log.WarnContext(ctx, "rooms: fetch ended with an error", slog.Any("error", err))
			c.pause(ctx)
		}
	}
}

// pause waits RetryDelay or until ctx ends.
func (c *roomConsumer) pause(ctx context.Context) {
	_ = ctxwait.Sleep(ctx, c.retryDelay) // an ended ctx ends the loop that called it
}

// handle processes one message and acknowledges it, or asks for it
// again. It does not stop half way when ctx ends (shutdown): the
// message's transaction and ack finish, bounded by handleTimeout.
func (c *roomConsumer) handle(ctx context.Context, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.handleTimeout)
	defer cancel()
	ev, err := decode(msg.Headers(), msg.Data())
	log := c.log.With(slog.String("event_id", clip(msg.Headers().Get(jetstream.MsgIDHeader))), slog.String("subject", clip(msg.Subject())))
	switch {
	case errors.Is(err, errIgnoredType):
		c.ack(ctx, msg, outcomeIgnored, log)
		return
	case errors.Is(err, errUnknownType):
		log.WarnContext(ctx, "rooms: unknown event type; acknowledged and counted", slog.Any("error", err))
		c.ack(ctx, msg, outcomeUnknown, log)
		return
	case err != nil:
		log.ErrorContext(ctx, "rooms: malformed event; acknowledged and counted, not applied",
			slog.Any("error", err), slog.Int("bytes", len(msg.Data())), slog.Any("delivery", deliveryOf(msg)))
		c.ack(ctx, msg, outcomeMalformed, log)
		return
	}
	var levelUps []outbox.Message
	res, err := c.inbox.Process(ctx, ev.ID, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		levelUps, err = c.proj.apply(ctx, tx, ev)
		return err
	})
	if err != nil {
		c.deliveries.WithLabelValues(outcomeFailed).Inc()
		log.WarnContext(ctx, "rooms: event not applied; delivered again after the retry delay",
			slog.String("event_type", ev.Type), slog.Any("error", err), slog.Any("delivery", deliveryOf(msg)))
		_ = msg.NakWithDelay(c.retryDelay)
		return
	}
	if res == inbox.Duplicate {
		log.InfoContext(ctx, "rooms: duplicate delivery absorbed by the inbox", slog.String("event_type", ev.Type), slog.Any("delivery", deliveryOf(msg)))
		c.ack(ctx, msg, outcomeDuplicate, log)
		return
	}
	c.ack(ctx, msg, outcomeProcessed, log)
	if len(levelUps) > 0 {
		// The fast path; the outbox worker delivers what it cannot (and
		// has logged why).
		if err := c.publisher.PublishNow(ctx, levelUps...); err != nil {
			log.DebugContext(ctx, "level-ups left to the outbox worker after commit", slog.Any("error", err))
		}
	}
}

// ack acknowledges msg and waits for the server to confirm, counting the
// outcome. A lost ack is logged: the message comes again, and the inbox
// absorbs it.
func (c *roomConsumer) ack(ctx context.Context, msg jetstream.Msg, outcome string, log *slog.Logger) {
	if err := msg.DoubleAck(ctx); err != nil {
		c.deliveries.WithLabelValues(outcomeAckFailed).Inc()
		log.WarnContext(ctx, "rooms: ack failed; the message will come again", slog.String("outcome", outcome), slog.Any("error", err))
		return
	}
	c.deliveries.WithLabelValues(outcome).Inc()
}

// deliveryOf is how many times JetStream has delivered msg (1 the first
// time), or 0 when the metadata cannot be read.
func deliveryOf(msg jetstream.Msg) uint64 {
	if md, err := msg.Metadata(); err == nil {
		return md.NumDelivered
	}
	return 0
}
