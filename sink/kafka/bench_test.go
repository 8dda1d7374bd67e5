package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
)

// BenchmarkRecord is the sink's own work per event, without the client:
// the topic, the headers and the size check.
func BenchmarkRecord(b *testing.B) {
	s, err := kafka.New(kafka.Config{Seeds: []string{"127.0.0.1:1"}, Topic: topic})
	require.NoError(b, err)
	defer s.Close()
	m := message("e-1", "room-1")
	m.Payload = make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Record(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublish is one Publish after another through franz-go to
// kfake on loopback (its CPU counts too): the latency of Concurrency 1.
func BenchmarkPublish(b *testing.B) {
	c := cluster(b)
	s := newSink(b, c.ListenAddrs(), kafka.Config{})
	m := message("e-1", "room-1")
	m.Payload = make([]byte, 256)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWorker is events/s through an outbox.Worker (Ordering, 64
// keys, the in-memory store) and the sink to kfake on loopback, at
// Concurrency 1 and 8.
func BenchmarkWorker(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("Concurrency=%d", conc), func(b *testing.B) {
			c := cluster(b)
			s := newSink(b, c.ListenAddrs(), kafka.Config{Logger: outboxtest.Logger(b)})
			sinktest.Throughput(b, s, conc, func(i int) outbox.Message {
				return message(fmt.Sprintf("b-%08d", i), fmt.Sprintf("room-%d", i%64))
			})
		})
	}
}
