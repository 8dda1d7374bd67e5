package tencentim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

// benchSink is a sink to a tencentimtest fake on loopback (its CPU
// counts too), with the client-side rate limits off: the real service's
// limits (DefaultRateLimit calls/s, DefaultGroupRateLimit per group)
// would otherwise be what the benchmark measures.
func benchSink(b *testing.B) *tencentim.Sink {
	f := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin})
	b.Cleanup(f.Close)
	s, err := tencentim.New(tencentim.Config{BaseURL: f.URL(), SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin,
		RateLimit: -1, GroupRateLimit: -1, Logger: outboxtest.Logger(b)})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkPublish is one Publish after another to the fake: the latency
// of Concurrency 1, the HTTP client and the fake included.
func BenchmarkPublish(b *testing.B) {
	s := benchSink(b)
	m := roomMsg("e-1", "room-1", "RoomGiftSent")
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.ID = fmt.Sprintf("p-%08d", i)
		i++
		if err := s.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWorker is events/s through an outbox.Worker (Ordering, 64
// keys, the in-memory store) and the sink to the fake on loopback, at
// Concurrency 1 and 8, rate limits off.
func BenchmarkWorker(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("Concurrency=%d", conc), func(b *testing.B) {
			s := benchSink(b)
			store := outboxtest.NewStore()
			msgs := make([]outbox.Message, b.N)
			for i := range msgs {
				id, room := fmt.Sprintf("b-%08d", i), fmt.Sprintf("room-%d", i%64)
				msgs[i] = roomMsg(id, room, "RoomGiftSent")
			}
			tx := store.Begin()
			require.NoError(b, store.Enqueue(context.Background(), tx, nil, msgs...))
			require.NoError(b, tx.Commit())
			w, err := outbox.NewWorker(store, s, outbox.WorkerOptions{
				Ordering: true, Concurrency: conc, BatchSize: 200, PollInterval: 10 * time.Millisecond,
				Logger: outboxtest.Logger(b),
			})
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for left := b.N; left > 0; {
				r, err := w.ProcessBatch(context.Background())
				require.NoError(b, err)
				require.Zero(b, r.Retried+r.Dead, "failed publishes")
				left -= r.Published
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
