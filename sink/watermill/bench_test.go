package watermill_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// BenchmarkOverhead is the sink's own work per event, without a broker:
// the topic, the Watermill message and its metadata, the call and its
// slot (a publisher that returns at once).
func BenchmarkOverhead(b *testing.B) {
	s := newSink(b, wmsink.Config{Publisher: nopPublisher, TopicFor: func(outbox.Message) (string, error) { return "room-events", nil }})
	m := event("e-1", "room-1")
	m.Payload = make([]byte, 256)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// benchQueue is a durable queue on the machine's RabbitMQ, deleted when
// b ends.
func benchQueue(b *testing.B, url string) string {
	queue := randomName("bench-")
	conn, err := amqp091.Dial(url)
	require.NoError(b, err)
	ch, err := conn.Channel()
	require.NoError(b, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	require.NoError(b, err)
	b.Cleanup(func() {
		_, _ = ch.QueueDelete(queue, false, false, false)
		_ = conn.Close()
	})
	return queue
}

// benchBrokers are the sinks of the benchmarks, on the machine's
// brokers: watermill-amqp with confirms to a durable queue, and
// watermill-redisstream.
var benchBrokers = []struct {
	name string
	sink func(b *testing.B) *wmsink.Sink
}{
	{"RabbitMQ", func(b *testing.B) *wmsink.Sink {
		url := sharedAMQP(b)
		return newSink(b, wmsink.Config{Publisher: amqpPublisher(b, url), Topic: benchQueue(b, url), Logger: outboxtest.Logger(b)})
	}},
	{"Redis", func(b *testing.B) *wmsink.Sink {
		c := redis.NewClient(&redis.Options{Addr: sharedRedis(b)})
		stream := randomName("bench-")
		b.Cleanup(func() { _ = c.Del(context.Background(), stream).Err(); _ = c.Close() })
		return newSink(b, wmsink.Config{Publisher: redisPublisher(b, c), Topic: stream, Logger: outboxtest.Logger(b)})
	}},
}

// BenchmarkPublish is one Publish after another to each broker on
// loopback: the latency of Concurrency 1, the client's work included.
func BenchmarkPublish(b *testing.B) {
	for _, br := range benchBrokers {
		b.Run(br.name, func(b *testing.B) {
			s := br.sink(b)
			m := event("e-1", "room-1")
			m.Payload = make([]byte, 256)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Publish(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWorker is events/s through an outbox.Worker (Ordering, 64
// keys, the in-memory store) and the sink to each broker on loopback, at
// Concurrency 1 and 8.
func BenchmarkWorker(b *testing.B) {
	for _, br := range benchBrokers {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/Concurrency=%d", br.name, conc), func(b *testing.B) {
				sinktest.Throughput(b, br.sink(b), conc, func(i int) outbox.Message {
					return event(fmt.Sprintf("b-%08d", i), fmt.Sprintf("room-%d", i%64))
				})
			})
		}
	}
}
