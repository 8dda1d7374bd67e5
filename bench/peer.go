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
)

// peer measures the Watermill SQL forwarder (watermill-sql/v4, MySQL
// schema) moving events from its outbox table to an in-memory publisher,
// on the same database: with batches of 100 (as the relay), and with
// batches of 1 (what its documentation calls the safest value).
func (b *bench) peer(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, batch := range []int{100, 1} {
		n := sz.peerEvents
		if batch == 1 {
			n = max(n/10, 500)
		}
		peer, err := b.watermill(ctx, n, batch)
		if err != nil {
			return nil, err
		}
		target := ""
		if batch == 100 {
			target = "relay ≥ 10× peer"
		}
		rows = append(rows, row{
			scenario: fmt.Sprintf("peer: Watermill SQL forwarder (watermill-sql v4, MySQL, batch %d), %d events", batch, n),
			figure:   evRate(peer), reference: "relay batch 100, 1 worker " + evRate(b.relay100), ratio: "relay/peer " + ratio(b.relay100, peer), target: target,
		})
	}
	return rows, nil
}

func (b *bench) watermill(ctx context.Context, n, batch int) (float64, error) {
	db, err := b.pool()
	if err != nil {
		return 0, err
	}
	defer db.Close()
	logger := watermill.NopLogger{}
	beginner := wmsql.BeginnerFromStdSQL(db)
	schema := wmsql.DefaultMySQLSchema{SubscribeBatchSize: batch}
	fwdTopic, topic := fmt.Sprintf("bench_forwarder_%d", batch), "room_events"

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
		ConsumerGroup: "bench", SchemaAdapter: schema, OffsetsAdapter: wmsql.DefaultMySQLOffsetsAdapter{},
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
	peer := perSec(n, time.Since(start))
	_ = fwd.Close()
	_ = out.Close()
	return peer, nil
}
