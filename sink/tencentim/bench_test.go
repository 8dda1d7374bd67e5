package tencentim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
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
			sinktest.Throughput(b, benchSink(b), conc, func(i int) outbox.Message {
				return roomMsg(fmt.Sprintf("b-%08d", i), fmt.Sprintf("room-%d", i%64), "RoomGiftSent")
			})
		})
	}
}
