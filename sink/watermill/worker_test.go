package watermill_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Sizes of the end-to-end runs: events enqueued before the outage and
// while the broker is away, over keys keys.
const (
	e2eBefore = 150
	e2eDuring = 150
	e2eKeys   = 7
)

// runThroughOutage runs a worker (Ordering, Concurrency 4) on a fresh
// MySQL store that delivers e2eBefore+e2eDuring events through sink; once
// some are delivered it calls stop, enqueues the rest, waits until the
// worker meets the outage, calls start, and waits until every event is
// published. Then it reads what the broker holds with received and checks
// that every event arrived (nothing lost), each key's first copies in
// enqueue order, and nothing dead.
func runThroughOutage(t *testing.T, sink outbox.Sink, stop, start func(), received func() []*message.Message) {
	ctx := context.Background()
	d := testutil.NewDatabase(t)
	store, err := mysql.New(d.DB, mysql.Options{Table: "outbox"})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	var sent []outbox.Message
	for i := range e2eBefore + e2eDuring {
		sent = append(sent, event(fmt.Sprintf("e2e-%04d", i), fmt.Sprintf("room-%d", i%e2eKeys)))
	}
	require.NoError(t, store.Enqueue(ctx, d.DB, nil, sent[:e2eBefore]...))
	w, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
		Ordering: true, Concurrency: 4, PollInterval: 20 * time.Millisecond, PublishTimeout: 2 * time.Second,
		Retry:   outbox.FixedInterval{Interval: 50 * time.Millisecond},
		Breaker: outbox.SinkBreaker{MaxProbeInterval: 200 * time.Millisecond},
		Logger:  outboxtest.Logger(t),
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	halt := func() { cancel(); <-done }
	t.Cleanup(halt)
	stats := func() backend.Stats {
		st, err := store.Stats(ctx)
		require.NoError(t, err)
		require.Zero(t, st.Dead, "nothing dead-lettered")
		return st
	}
	outboxtest.Eventually(t, "some events delivered", func() bool { return stats().Pending < e2eBefore-20 })

	stop()
	away := true
	t.Cleanup(func() {
		if away {
			start()
		}
	})
	require.NoError(t, store.Enqueue(ctx, d.DB, nil, sent[e2eBefore:]...))
	outboxtest.Eventually(t, "the worker meets the outage", func() bool {
		recs, err := store.List(ctx, mysql.ListFilter{Status: outbox.StatusPending, Limit: 500})
		require.NoError(t, err)
		return slices.ContainsFunc(recs, func(r outbox.Record) bool { return r.LastError != "" })
	})
	start()
	away = false
	outboxtest.Eventually(t, "every event published", func() bool { return stats().Pending == 0 })
	halt()

	var msgs []*message.Message
	outboxtest.Eventually(t, "every event received", func() bool {
		msgs = received()
		seen := map[string]bool{}
		for _, m := range msgs {
			seen[m.UUID] = true
		}
		return len(seen) == len(sent)
	})
	requireInOrder(t, msgs, sent)
	t.Logf("%d events, %d messages received (%d repeats)", len(sent), len(msgs), len(msgs)-len(sent))
}

// requireInOrder checks that each key's first copies in msgs are in the
// order of sent.
func requireInOrder(t *testing.T, msgs []*message.Message, sent []outbox.Message) {
	t.Helper()
	seen := map[string]bool{}
	got := map[string][]string{}
	for _, m := range msgs {
		if !seen[m.UUID] {
			seen[m.UUID] = true
			key := m.Metadata.Get(wmsink.MetadataEventKey)
			got[key] = append(got[key], m.UUID)
		}
	}
	want := map[string][]string{}
	for _, m := range sent {
		require.True(t, seen[m.ID], "%s was lost", m.ID)
		want[m.Key] = append(want[m.Key], m.ID)
	}
	require.Equal(t, want, got, "each key's first copies in enqueue order")
}

// TestWorkerThroughRedisCrash: a worker on MySQL delivers through
// watermill-redisstream to a redis-server that is killed (SIGKILL) and
// started again on its append-only file mid-run.
func TestWorkerThroughRedisCrash(t *testing.T) {
	srv := startRedis(t, "")
	c := srv.Client(t)
	stream := randomName("e2e-")
	s := newSink(t, wmsink.Config{Publisher: redisPublisher(t, c), Topic: stream})
	runThroughOutage(t, s, srv.Stop, func() { srv.Start(t) }, func() []*message.Message {
		ms, err := readStream(c, stream)
		require.NoError(t, err)
		return ms
	})
}

// TestWorkerThroughRabbitMQFreeze: a worker on MySQL delivers through
// watermill-amqp (confirms) to a RabbitMQ node that freezes mid-run
// (calls time out and are left in the publisher) and thaws; the events
// are consumed back through watermill-amqp's subscriber.
func TestWorkerThroughRabbitMQFreeze(t *testing.T) {
	rabbit := privateRabbit(t)
	queue := randomName("e2e-")
	col := consumeAMQP(t, rabbit.URL, queue)
	s := newSink(t, wmsink.Config{Publisher: amqpPublisher(t, rabbit.URL), Topic: queue})
	runThroughOutage(t, s, func() { rabbit.Freeze(t) }, func() { rabbit.Thaw(t) }, col.Messages)
}
