package natsjs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/natsjs/internal/natstest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
)

// BenchmarkMsg is the sink's own work per event, without the server:
// the subject and the headers.
func BenchmarkMsg(b *testing.B) {
	s := offlineSink(b, natsjs.Config{Prefix: "bench"})
	m := message("e-1", "room-1")
	m.Payload = make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Msg(m); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSink is a sink to a stream of its own on the machine's NATS
// server (file storage, as StreamConfig makes it), deleted when b ends.
func benchSink(b *testing.B) *natsjs.Sink {
	js, err := jetstream.New(natstest.NATS(b))
	require.NoError(b, err)
	var r [4]byte
	_, _ = rand.Read(r[:])
	suffix := hex.EncodeToString(r[:])
	ctx := context.Background()
	_, err = js.CreateStream(ctx, natsjs.StreamConfig("BENCH_"+suffix, "bench"+suffix, 2*time.Minute))
	require.NoError(b, err)
	b.Cleanup(func() { _ = js.DeleteStream(context.Background(), "BENCH_"+suffix) })
	s, err := natsjs.New(natsjs.Config{JetStream: js, Prefix: "bench" + suffix, Logger: outboxtest.Logger(b)})
	require.NoError(b, err)
	return s
}

// BenchmarkPublish is one Publish after another to the machine's NATS
// server on loopback, each waiting for JetStream's acknowledgement: the
// latency of Concurrency 1.
func BenchmarkPublish(b *testing.B) {
	s := benchSink(b)
	m := message("e-1", "room-1")
	m.Payload = make([]byte, 256)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.ID = fmt.Sprintf("p-%08d", i) // not a duplicate, which the stream would discard
		i++
		if err := s.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWorker is events/s through an outbox.Worker (Ordering, 64
// keys, the in-memory store) and the sink to the machine's NATS server
// on loopback, at Concurrency 1 and 8.
func BenchmarkWorker(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("Concurrency=%d", conc), func(b *testing.B) {
			sinktest.Throughput(b, benchSink(b), conc, func(i int) outbox.Message {
				return message(fmt.Sprintf("b-%08d", i), fmt.Sprintf("room-%d", i%64))
			})
		})
	}
}
