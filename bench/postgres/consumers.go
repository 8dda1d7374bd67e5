package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// The consumers scenario (issue 38): what a named consumer costs the
// server. The same backlog is drained by the default consumer alone, then
// with 1 and with 3 named consumers (Store.AddConsumer, StartNow, added
// before the backlog is written) beside it, every consumer by a worker of
// its own, each on a pool of its own, until every consumer has published
// every event. The arms alternate from round to round as the compare
// scenario's do. Reported per enqueued event, all consumers' deliveries
// together: the WAL the server wrote, its CPU time (with -server-pid) and
// the rows it touched; and how much the WAL grows per consumer added.

// consumerConfig is the one configuration of the consumers scenario:
// one worker per consumer, batches of 100, 512 B payloads.
var consumerConfig = compareConfig{Workers: 1, Batch: 100, Payload: 512}

// consumersArm is the arm that drains the backlog with the default
// consumer and as many named consumers as named says.
func consumersArm(named int) arm {
	return arm{
		name:       fmt.Sprintf("default + %d named", named),
		deliveries: 1 + named,
		prepare: func(ctx context.Context, b *bench, n int, c compareConfig) error {
			return consumersPrepare(ctx, b, n, c, named)
		},
		drain: func(ctx context.Context, b *bench, n int, c compareConfig) (time.Duration, int, error) {
			return consumersDrain(ctx, b, n, c, named)
		},
		left: func(ctx context.Context, b *bench) (int, error) { return consumersLeft(ctx, b, named) },
	}
}

// consumerName is the name of the i-th named consumer (from 1).
func consumerName(i int) string { return fmt.Sprintf("named-%d", i) }

// consumersPrepare makes a fresh table with named consumers registered,
// then the backlog, as relayPrepare writes it.
func consumersPrepare(ctx context.Context, b *bench, n int, c compareConfig, named int) error {
	if err := relayFresh(ctx, b, postgres.Options{}); err != nil {
		return err
	}
	db, err := b.relayDB()
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := postgres.New(db, postgres.Options{Table: relayTable})
	if err != nil {
		return err
	}
	for i := 1; i <= named; i++ {
		if err := s.AddConsumer(ctx, consumerName(i), postgres.StartNow); err != nil {
			return err
		}
	}
	return relayFill(ctx, b, n, c)
}

// consumersLeft counts the records not yet published, of every consumer,
// through the operator contract (Stats), whatever the store's schema.
func consumersLeft(ctx context.Context, b *bench, named int) (int, error) {
	db, err := b.relayDB()
	if err != nil {
		return 0, err
	}
	defer db.Close()
	s, err := postgres.New(db, postgres.Options{Table: relayTable})
	if err != nil {
		return 0, err
	}
	queues := []backend.StatsReader{s}
	for i := 1; i <= named; i++ {
		q, err := s.Consumer(consumerName(i))
		if err != nil {
			return 0, err
		}
		queues = append(queues, q)
	}
	return benchkit.Left(ctx, queues)
}

// consumersDrain runs one worker for the default consumer and one for
// each named consumer until every consumer's store has written the
// outcome of every event, and returns how long that took and the
// deliveries of all consumers together. A consumer whose sink took other
// than n deliveries is an error.
func consumersDrain(ctx context.Context, b *bench, n int, c compareConfig, named int) (time.Duration, int, error) {
	var (
		sinks   = make([]countingSink, 1+named)
		applied = make([]atomic.Int64, 1+named)
		lanes   = make([]lane, 1+named)
	)
	for i := range lanes {
		lanes[i] = lane{sink: &sinks[i], applied: &applied[i]}
		if i > 0 {
			lanes[i].consumer = consumerName(i)
		}
	}
	d, err := drainLanes(ctx, b, "consumers", n, c.Batch, lanes)
	var total int
	var counts []string
	for i := range sinks {
		total += int(sinks[i].n.Load())
		counts = append(counts, fmt.Sprintf("%d published, %d outcomes written", sinks[i].n.Load(), applied[i].Load()))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w (of %d each: %s)", err, n, strings.Join(counts, "; "))
	}
	for i := range sinks {
		if got := sinks[i].n.Load(); got != int64(n) {
			return 0, 0, fmt.Errorf("consumer %d of %d: %d deliveries of %d events", i, 1+named, got, n)
		}
	}
	return d, total, nil
}

// consumers runs the consumers scenario.
func (b *bench) consumers(ctx context.Context, sz sizes) ([]row, error) {
	n, c := sz.consumerEvents, consumerConfig
	arms := make([]arm, len(sz.consumerCounts))
	for i, k := range sz.consumerCounts {
		arms[i] = consumersArm(k)
	}
	results, err := benchkit.Alternate(sz.compareRounds, len(arms), func(k int) string { return arms[k].name },
		func(k int) (drainStats, error) { return b.measured(ctx, arms[k], n, c) })
	if err != nil {
		return nil, err
	}
	med := make([]drainStats, len(arms))
	for i := range arms {
		med[i] = medianStats(results[i])
	}
	return consumerRows(sz.consumerCounts, med, n, sz.compareRounds), nil
}

// consumerRows reports the consumers scenario: for each number of named
// consumers, the rate, the WAL, server CPU and rows per enqueued event,
// and the WAL's growth per consumer added, against the default consumer
// alone and against the previous number.
func consumerRows(counts []int, med []drainStats, n, rounds int) []row {
	what := fmt.Sprintf("1 worker per consumer, batch %d, %d B payload, %d events, median of %d", consumerConfig.Batch, consumerConfig.Payload, n, rounds)
	var rows []row
	for i, k := range counts {
		st := med[i]
		wal := st.perEvent(st.counter.wal)
		r := row{
			Scenario: fmt.Sprintf("consumers: default + %d named, %s", k, what),
			Figure:   fmt.Sprintf("%.0f B WAL per enqueued event", wal),
		}
		if server, ok := st.serverCPU(); ok {
			r.Figure += fmt.Sprintf(", server CPU %.1f µs", server)
		}
		r.Reference = fmt.Sprintf("%s drained by every consumer, %.0f deliveries/s; %s; %s; CPU %s", benchkit.EvRate(st.rate), st.rate*float64(1+k),
			st.rowsPerEvent(), perBatch(st, consumerConfig.Batch), st.cpuPerEvent())
		r.Ratio, r.Target = benchkit.ConsumerGrowth(counts, i, func(i int) float64 { return med[i].perEvent(med[i].counter.wal) }, func(base int) []string {
			b := med[base].perEvent(med[base].counter.wal)
			return []string{fmt.Sprintf("%s per consumer added to the default alone (%.0f B)", benchkit.GrowthPct(wal, b, k), b)}
		})
		rows = append(rows, r)
	}
	return rows
}
