package main

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
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
		if err := store.AddConsumer(ctx, "activity", mysql.StartNow); err != nil {
			return err
		}
		return b.fill(ctx, 0, n, "pending")
	}

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
	alone, err := b.drainLanes(ctx, n, []lane{{consumer: "activity", sink: &countingSink{}, opts: opts}}, b.pendingOf("activity"))
	if err != nil {
		return nil, err
	}
	if err := setup(); err != nil {
		return nil, err
	}
	both, err := b.drainLanes(ctx, 2*n, []lane{
		{sink: &countingSink{}, opts: opts},
		{consumer: "activity", sink: &countingSink{}, opts: opts},
	}, b.pendingOf("", "activity"))
	if err != nil {
		return nil, err
	}
	ownRate := benchkit.PerSec(n, own)
	ref := "the table's own consumer alone " + benchkit.EvRate(ownRate)
	log, err := b.consumerLog(ctx, sz)
	if err != nil {
		return nil, err
	}
	return append([]row{{
		Scenario: fmt.Sprintf("named consumer, batch 100, 1 worker, no-op sink, %d events", n),
		Figure:   benchkit.EvRate(benchkit.PerSec(n, alone)), Reference: ref, Ratio: benchkit.Ratio(benchkit.PerSec(n, alone), ownRate),
	}, {
		Scenario: fmt.Sprintf("two consumers side by side (own columns + named), 1 worker each, %d events", n),
		Figure:   benchkit.EvRate(benchkit.PerSec(2*n, both)) + " deliveries", Reference: ref, Ratio: benchkit.Ratio(benchkit.PerSec(2*n, both), ownRate),
	}}, log...), nil
}

// consumerCounts are issue 38's numbers of named consumers beside the
// default consumer (the table's own status columns).
var consumerCounts = []int{0, 1, 3}

// consumerBatch and consumerPayload are the consumer log scenario's batch
// and payload bytes.
const consumerBatch, consumerPayload = 100, 512

// consumerLog measures what named consumers cost the server (issue 38):
// the same backlog of 512 B events on 200 keys, drained by the default
// consumer alone, then with 1 and with 3 named consumers (added before
// the backlog is written) beside it, each consumer by a worker of its
// own on a pool of its own, until every consumer has published every
// event; in alternating rounds (-rounds), medians by rate. It reports,
// per enqueued event and all consumers' deliveries together, the redo
// the server wrote (Innodb_os_log_written) and its CPU time (with
// -server-pid), and how much the redo grows per consumer added: with the
// events' own write (the backlog's fill, measured) and of the deliveries
// alone.
func (b *bench) consumerLog(ctx context.Context, sz sizes) ([]row, error) {
	n := sz.consumerEvents
	dups := make([]int, len(sz.consumerCounts)) // each count's, over all rounds
	name := func(k int) string { return fmt.Sprintf("default + %d named consumers", sz.consumerCounts[k]) }
	results, err := benchkit.Alternate(sz.compareRounds, len(sz.consumerCounts), name, func(k int) (drainStats, error) {
		st, dup, err := b.consumersDrain(ctx, n, sz.consumerCounts[k])
		dups[k] += dup
		return st, err
	})
	if err != nil {
		return nil, err
	}
	med := make([]drainStats, len(results))
	for i := range results {
		med[i] = medianStats(results[i])
	}
	rows := consumerLogRows(sz.consumerCounts, med, n, sz.compareRounds)
	for i := range rows {
		if d := dups[i]; d > 0 {
			rows[i].Reference += fmt.Sprintf("; %d duplicate deliveries in %d rounds", d, sz.compareRounds)
		}
	}
	return rows, nil
}

// consumerName is the name of the i-th named consumer (from 1).
func consumerName(i int) string { return fmt.Sprintf("named-%d", i) }

// consumersDrain makes fresh tables with named consumers registered and
// a backlog of n events, and drains it with one worker per consumer,
// between two readings of the counters. It returns the deliveries beyond
// one per event and consumer (at-least-once allows them; none are
// expected).
func (b *bench) consumersDrain(ctx context.Context, n, named int) (drainStats, int, error) {
	store, err := b.freshStore(ctx, b.db)
	if err != nil {
		return drainStats{}, 0, err
	}
	queues := []backend.StatsReader{store}
	for i := 1; i <= named; i++ {
		if err := store.AddConsumer(ctx, consumerName(i), mysql.StartNow); err != nil {
			return drainStats{}, 0, err
		}
		c, err := store.Consumer(consumerName(i))
		if err != nil {
			return drainStats{}, 0, err
		}
		queues = append(queues, c)
	}
	before, err := b.readCounters(ctx)
	if err != nil {
		return drainStats{}, 0, err
	}
	if err := b.fillSized(ctx, 0, n, "pending", fillPayload(consumerPayload)); err != nil {
		return drainStats{}, 0, err
	}
	after, err := b.readCounters(ctx)
	if err != nil {
		return drainStats{}, 0, err
	}
	if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		return drainStats{}, 0, err
	}
	opts := outbox.WorkerOptions{BatchSize: consumerBatch, PollInterval: 10 * time.Millisecond}
	lanes := []lane{{sink: &countingSink{}, opts: opts}}
	for i := 1; i <= named; i++ {
		lanes = append(lanes, lane{consumer: consumerName(i), sink: &countingSink{}, opts: opts})
	}
	left := func(ctx context.Context) (int, error) { return benchkit.Left(ctx, queues) }
	due := (1 + named) * n
	st, err := b.measured(ctx, n, func() (time.Duration, error) { return b.drainLanes(ctx, due, lanes, left) })
	if err != nil {
		return drainStats{}, 0, err
	}
	st.written = (after.redo - before.redo) / float64(n)
	var got int
	for _, l := range lanes {
		got += int(l.sink.count())
	}
	return st, got - due, nil
}

// consumerLogRows reports the consumer log scenario: for each number of
// named consumers the redo, server CPU and rows per enqueued event, and
// the redo's growth per consumer added, against the default consumer
// alone and against the number before.
func consumerLogRows(counts []int, med []drainStats, n, rounds int) []row {
	what := fmt.Sprintf("1 worker per consumer, batch %d, %d B payload, %d events, median of %d", consumerBatch, consumerPayload, n, rounds)
	var rows []row
	for i, k := range counts {
		st := med[i]
		redo := st.perEvent(st.counter.redo)
		r := row{
			Scenario: fmt.Sprintf("consumers: default + %d named, %s", k, what),
			Figure:   fmt.Sprintf("%.0f B redo per enqueued event", redo),
			Reference: fmt.Sprintf("%s drained by every consumer, %.0f deliveries/s; per enqueued event: %.2f rows updated, %.1f rows read; %.1f commits per %d events; CPU %s",
				benchkit.EvRate(st.rate), st.rate*float64(1+k), st.perEvent(st.counter.rowsUpdated), st.perEvent(st.counter.rowsRead),
				st.perEvent(st.counter.commits)*consumerBatch, consumerBatch, st.cpuPerEvent()),
		}
		if st.counter.cpu.server > 0 {
			r.Figure += fmt.Sprintf(", server CPU %.1f µs", st.perEvent(st.counter.cpu.server)*1e6)
		}
		r.Ratio, r.Target = benchkit.ConsumerGrowth(counts, i, func(i int) float64 { return med[i].perEvent(med[i].counter.redo) }, func(base int) []string {
			ref := med[base].perEvent(med[base].counter.redo)
			// The log bytes of an enqueued event are its write and its
			// deliveries': the write measured as the bulk fill's (the
			// least a write costs, so that the growth is not understated).
			w := med[base].written
			return []string{
				fmt.Sprintf("%s per consumer added, the event's write (%.0f B) and deliveries together", benchkit.GrowthPct(w+redo, w+ref, k), w),
				fmt.Sprintf("%s of the deliveries' alone (%.0f B)", benchkit.GrowthPct(redo, ref, k), ref),
			}
		})
		rows = append(rows, r)
	}
	return rows
}
