package watermill_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// unroutable is the type the suite's TopicFor cannot map: a message of
// it must fail as Permanent.
const unroutable = "Unroutable"

// topicFor sends every message to topic, except those of type
// unroutable.
func topicFor(topic string) func(outbox.Message) (string, error) {
	return func(m outbox.Message) (string, error) {
		if m.Type == unroutable {
			return "", errors.New("no topic for this type")
		}
		return topic, nil
	}
}

var unacceptable = []outbox.Message{
	{ID: "unroutable", Type: unroutable, Key: "k"},
	{ID: "control-character-topic", Type: "T\x00", Key: "k"},
}

// TestConformanceAMQP runs the sink suite against a real RabbitMQ node of
// the tests' own (so that the Outage check can take it away without
// touching the machine's broker), through watermill-amqp with publisher
// confirms: a durable queue per sink, read back through watermill-amqp's
// subscriber. RabbitMQ keeps a queue's order; it does not dedupe. For the
// Outage check the broker freezes (see rabbitNode.Freeze): calls hang
// until their deadline, are left in the publisher, and their confirms
// arrive once it thaws. TestBrokerStopsAndStarts stops it for real.
func TestConformanceAMQP(t *testing.T) {
	rabbit := privateRabbit(t)
	sinktest.Run(t, sinktest.Peer{
		NewSink: func(t *testing.T) sinktest.Target {
			queue := randomName("conf-")
			c := consumeAMQP(t, rabbit.URL, queue)
			s := newSink(t, wmsink.Config{Publisher: amqpPublisher(t, rabbit.URL), TopicFor: amqpTopicFor(queue),
				Check: wmsink.CheckAMQP, Redact: []string{rabbitPassword}})
			return sinktest.Target{Sink: s, Received: c.Received}
		},
		Stop:         func(t *testing.T) { rabbit.Freeze(t) },
		Start:        func(t *testing.T) { rabbit.Thaw(t) },
		Unacceptable: unacceptable,
		Secrets:      []string{rabbitPassword, rabbit.URL},
		Ordered:      true,
		KeepsHeaders: true,
	})
}

// amqpTopicFor is topicFor, and a type with a NUL maps to a topic with
// one (which the sink refuses).
func amqpTopicFor(queue string) func(outbox.Message) (string, error) {
	return func(m outbox.Message) (string, error) {
		if m.Type == "T\x00" {
			return queue + "\x00", nil
		}
		return topicFor(queue)(m)
	}
}

// TestConformanceRedis runs the sink suite against a real redis-server of
// the test's own with a password (killed and started again for the Outage
// check, its append-only file kept), through watermill-redisstream: a
// stream per sink, read back with XRANGE and watermill-redisstream's
// unmarshaller. A stream keeps its order; Redis does not dedupe. The
// Misconfigured sink's topic is a key that holds a string (WRONGTYPE),
// which classifyRedis, the Classify of a service on Redis, calls
// Unavailable.
func TestConformanceRedis(t *testing.T) {
	const password = "redis-Suite-pa55word-0c4b8e2f6a1d"
	srv := startRedis(t, password)
	sinktest.Run(t, sinktest.Peer{
		NewSink: func(t *testing.T) sinktest.Target {
			stream := randomName("conf-")
			c := srv.Client(t)
			s := newSink(t, wmsink.Config{Publisher: redisPublisher(t, c), TopicFor: amqpTopicFor(stream), Classify: classifyRedis})
			return sinktest.Target{Sink: s, Received: streamDeliveries(c, stream)}
		},
		Stop:         func(*testing.T) { srv.Stop() },
		Start:        func(t *testing.T) { srv.Start(t) },
		Unacceptable: unacceptable,
		Misconfigured: func(t *testing.T) outbox.Sink {
			c := srv.Client(t)
			key := randomName("not-a-stream-")
			require.NoError(t, c.Set(context.Background(), key, "x", 0).Err())
			return newSink(t, wmsink.Config{Publisher: redisPublisher(t, c), Topic: key, Classify: classifyRedis})
		},
		Secrets:      []string{password},
		Ordered:      true,
		KeepsHeaders: true,
	})
}
