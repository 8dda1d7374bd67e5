package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// peer measures the Watermill SQL forwarder (watermill-sql/v4, MySQL
// schema) moving events from its outbox table to an in-memory publisher,
// on the same database: with batches of 100 (as the relay), and with
// batches of 1 (what its documentation calls the safest value).
func (b *bench) peer(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, c := range []struct {
		batch int
		queue bool
	}{{100, false}, {1, false}, {100, true}} {
		n := sz.peerEvents
		if c.batch == 1 {
			n = max(n/10, 500)
		}
		peer, err := b.watermill(ctx, n, c.batch, c.queue)
		if err != nil {
			return nil, err
		}
		target, schema := "", "MySQL schema, consumer-group offset"
		if c.batch == 100 && !c.queue {
			target = "relay ≥ 10× peer"
		}
		if c.queue {
			schema = "MySQL queue schema, acked per message"
		}
		rows = append(rows, row{
			Scenario: fmt.Sprintf("peer: Watermill SQL forwarder (watermill-sql v4, %s, batch %d), %d events", schema, c.batch, n),
			Figure:   benchkit.EvRate(peer), Reference: "relay batch 100, 1 worker " + benchkit.EvRate(b.relay100), Ratio: "relay/peer " + benchkit.Ratio(b.relay100, peer), Target: target,
		})
	}
	return rows, nil
}

// watermill runs the forwarder over n messages. With queue it uses the
// queue schema, which marks each message acked (per-message state, as
// the relay keeps) instead of advancing one offset per consumer group.
func (b *bench) watermill(ctx context.Context, n, batch int, queue bool) (float64, error) {
	db, err := b.pool()
	if err != nil {
		return 0, err
	}
	defer db.Close()
	logger := watermill.NopLogger{}
	beginner := wmsql.BeginnerFromStdSQL(db)
	var schema wmsql.SchemaAdapter = wmsql.DefaultMySQLSchema{SubscribeBatchSize: batch}
	var offsets wmsql.OffsetsAdapter = wmsql.DefaultMySQLOffsetsAdapter{}
	fwdTopic, topic, group := fmt.Sprintf("bench_forwarder_%d", batch), "room_events", "bench"
	if queue {
		schema = wmsql.MySQLQueueSchema{SubscribeBatchSize: batch, GeneratePayloadType: func(string) string { return "LONGBLOB" }}
		offsets, fwdTopic, group = wmsql.MySQLQueueOffsetsAdapter{}, fmt.Sprintf("bench_queue_%d", batch), ""
	}

	sqlPub, err := wmsql.NewPublisher(beginner, wmsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, logger)
	if err != nil {
		return 0, err
	}
	pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: fwdTopic})
	for done := 0; done < n; {
		batch := make([]*message.Message, 0, 500)
		for ; len(batch) < 500 && done < n; done++ {
			batch = append(batch, message.NewMessage(watermill.NewUUID(), []byte(`{"gift":"rose","count":1}`)))
		}
		if err := pub.Publish(topic, batch...); err != nil {
			return 0, fmt.Errorf("watermill: fill: %w", err)
		}
	}

	out := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(n)}, logger)
	received, err := out.Subscribe(ctx, topic)
	if err != nil {
		return 0, err
	}
	sub, err := wmsql.NewSubscriber(beginner, wmsql.SubscriberConfig{
		ConsumerGroup: group, SchemaAdapter: schema, OffsetsAdapter: offsets,
		InitializeSchema: true, PollInterval: 10 * time.Millisecond,
	}, logger)
	if err != nil {
		return 0, err
	}
	fwd, err := forwarder.NewForwarder(sub, out, logger, forwarder.Config{ForwarderTopic: fwdTopic})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	go func() { _ = fwd.Run(runCtx) }()
	for got := 0; got < n; got++ {
		select {
		case m := <-received:
			m.Ack()
		case <-time.After(2 * time.Minute):
			return 0, fmt.Errorf("watermill: %d of %d forwarded after 2 minutes", got, n)
		}
	}
	peer := benchkit.PerSec(n, time.Since(start))
	_ = fwd.Close()
	_ = out.Close()
	return peer, nil
}
