package main

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// namedConsumers measures what a named consumer (Store.Consumer) costs
// against the table's own status columns: each of its claims first hands
// new messages over to the consumers' table, and its state lives in rows
// of their own. Every drain is of the same backlog at batch 100, and the
// reference is the table's own consumer draining it in the same scenario.
func (b *bench) namedConsumers(ctx context.Context, sz sizes) ([]row, error) {
	n := sz.relayEvents(100)
	opts := outbox.WorkerOptions{BatchSize: 100, PollInterval: 10 * time.Millisecond}
	// setup makes a fresh table with the named consumer "activity",
	// added before the backlog is written, as a consumer added from now
	// sees new messages.
	setup := func() error {
		store, err := b.freshStore(ctx, b.db)
		if err != nil {
			return err
		}
		if _, err := b.db.ExecContext(ctx, "DELETE FROM "+table+"_consumers"); err != nil {
			return err
		}
		if _, err := b.db.ExecContext(ctx, "DELETE FROM "+table+"_consumption"); err != nil {
			return err
		}
		if err := store.AddConsumer(ctx, "activity", mysql.StartNow); err != nil {
			return err
		}
		return b.fill(ctx, 0, n, "pending")
	}
	// activityLeft counts the messages the named consumer has yet to
	// publish, handed over or not.
	activityLeft := fmt.Sprintf("SELECT %d - COUNT(*) FROM %s_consumption WHERE consumer = 'activity' AND status = 'published'", n, table)

	if err := setup(); err != nil {
		return nil, err
	}
	own, err := b.drain(ctx, n, 1, &countingSink{}, opts)
	if err != nil {
		return nil, err
	}
	if err := setup(); err != nil {
		return nil, err
	}
	alone, err := b.drainLanes(ctx, n, []lane{{consumer: "activity", sink: &countingSink{}, opts: opts}}, activityLeft)
	if err != nil {
		return nil, err
	}
	if err := setup(); err != nil {
		return nil, err
	}
	both, err := b.drainLanes(ctx, 2*n, []lane{
		{sink: &countingSink{}, opts: opts},
		{consumer: "activity", sink: &countingSink{}, opts: opts},
	}, fmt.Sprintf("SELECT (SELECT COUNT(*) FROM %s WHERE status = 'pending') + (%s)", table, activityLeft))
	if err != nil {
		return nil, err
	}
	ownRate := perSec(n, own)
	ref := "the table's own consumer alone " + evRate(ownRate)
	return []row{{
		scenario: fmt.Sprintf("named consumer, batch 100, 1 worker, no-op sink, %d events", n),
		figure:   evRate(perSec(n, alone)), reference: ref, ratio: ratio(perSec(n, alone), ownRate),
	}, {
		scenario: fmt.Sprintf("two consumers side by side (own columns + named), 1 worker each, %d events", n),
		figure:   evRate(perSec(2*n, both)) + " deliveries", reference: ref, ratio: ratio(perSec(2*n, both), ownRate),
	}}, nil
}
