package sinktest

import (
	"context"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// Throughput is the body of a sink's worker benchmark: it enqueues b.N
// messages (message(i) for each i) in the in-memory store
// (outboxtest.NewStore, so that no database counts), delivers them
// through an outbox.Worker with Ordering and concurrency Concurrency to
// sink, and reports "events/s". Every publish must succeed. Give the
// messages a few dozen keys (Ordering holds a key to one message in
// flight), and IDs the peer does not dedupe against earlier runs.
//
//	for _, c := range []int{1, 8} {
//		b.Run(fmt.Sprintf("Concurrency=%d", c), func(b *testing.B) {
//			sinktest.Throughput(b, newSink(b), c, func(i int) outbox.Message { … })
//		})
//	}
func Throughput(b *testing.B, sink outbox.Sink, concurrency int, message func(i int) outbox.Message) {
	b.Helper()
	store := outboxtest.NewStore()
	msgs := make([]outbox.Message, b.N)
	for i := range msgs {
		msgs[i] = message(i)
	}
	tx := store.Begin()
	if err := store.Enqueue(context.Background(), tx, nil, msgs...); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	w, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
		Ordering: true, Concurrency: concurrency, BatchSize: 200, PollInterval: 10 * time.Millisecond,
		Logger: outboxtest.Logger(b),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for left := b.N; left > 0; {
		r, err := w.ProcessBatch(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if r.Retried+r.Dead > 0 {
			b.Fatalf("%d publishes failed (%d dead); a throughput benchmark needs a working peer", r.Retried+r.Dead, r.Dead)
		}
		left -= r.Published
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
