package watermill_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// amqpConfig is watermill-amqp's durable queue configuration (the topic
// names a durable queue on the default exchange; persistent messages)
// with publisher confirms, a pool of channels, and reconnects every
// fraction of a second, so that a broker that comes back is found soon.
func amqpConfig(url string) wmamqp.Config {
	cfg := wmamqp.NewDurableQueueConfig(url)
	cfg.Publish.ConfirmDelivery = true
	cfg.Publish.ChannelPoolSize = 8
	cfg.Consume.Qos.PrefetchCount = 64
	cfg.Connection.AmqpConfig = &amqp091.Config{Heartbeat: time.Minute, Locale: "en_US"}
	cfg.Connection.Reconnect = &wmamqp.ReconnectConfig{BackoffInitialInterval: 50 * time.Millisecond,
		BackoffRandomizationFactor: 0.5, BackoffMultiplier: 1.5, BackoffMaxInterval: 500 * time.Millisecond}
	return cfg
}

// amqpPublisher is a watermill-amqp publisher to the broker at url,
// closed when t ends.
func amqpPublisher(t testing.TB, url string) *wmamqp.Publisher {
	t.Helper()
	pub, err := wmamqp.NewPublisher(amqpConfig(url), watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// collector consumes a topic through a Watermill subscriber and keeps
// every message it receives, acknowledged, repeats included.
type collector struct {
	mu   sync.Mutex
	msgs []*message.Message
}

func (c *collector) run(ch <-chan *message.Message) {
	for m := range ch {
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
		m.Ack()
	}
}

// Messages returns what has arrived so far, in arrival order.
func (c *collector) Messages() []*message.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*message.Message(nil), c.msgs...)
}

// Received is Messages as the suite's deliveries.
func (c *collector) Received() ([]sinktest.Delivery, error) {
	var out []sinktest.Delivery
	for _, m := range c.Messages() {
		out = append(out, delivery(m))
	}
	return out, nil
}

// consumeAMQP declares the durable queue and consumes it through a
// watermill-amqp subscriber until t ends.
func consumeAMQP(t testing.TB, url, queue string) *collector {
	t.Helper()
	sub, err := wmamqp.NewSubscriber(amqpConfig(url), watermill.NopLogger{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, queue)
	require.NoError(t, err)
	c := &collector{}
	done := make(chan struct{})
	go func() { defer close(done); c.run(ch) }()
	t.Cleanup(func() {
		cancel()
		_ = sub.Close()
		<-done
	})
	return c
}

// readStream reads every entry of a Redis stream, in stream order,
// through watermill-redisstream's unmarshaller.
func readStream(c *redis.Client, stream string) ([]*message.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries, err := c.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		return nil, err
	}
	out := make([]*message.Message, 0, len(entries))
	for _, e := range entries {
		m, err := redisstream.DefaultMarshallerUnmarshaller{}.Unmarshal(e.Values)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func streamDeliveries(c *redis.Client, stream string) func() ([]sinktest.Delivery, error) {
	return func() ([]sinktest.Delivery, error) {
		ms, err := readStream(c, stream)
		if err != nil {
			return nil, err
		}
		out := make([]sinktest.Delivery, 0, len(ms))
		for _, m := range ms {
			out = append(out, delivery(m))
		}
		return out, nil
	}
}

// deleteQueue deletes a queue of the machine's RabbitMQ.
func deleteQueue(t testing.TB, url, queue string) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Logf("deleting queue %s: %v", queue, err)
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueueDelete(queue, false, false, false)
	}
}

// sharedRedisClient is a client of the machine's Redis, closed when t
// ends.
func sharedRedisClient(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: sharedRedis(t)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redisPublisher is a watermill-redisstream publisher on c (which the
// test closes).
func redisPublisher(t testing.TB, c *redis.Client) *redisstream.Publisher {
	t.Helper()
	pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: c}, watermill.NopLogger{})
	require.NoError(t, err)
	return pub
}

// delivery decodes a Watermill message back into the fields of the
// outbox message it was made from.
func delivery(m *message.Message) sinktest.Delivery {
	d := sinktest.Delivery{ID: m.UUID, Payload: m.Payload, Headers: map[string]string{}}
	for name, value := range m.Metadata {
		switch name {
		case wmsink.MetadataEventID:
			if value != m.UUID {
				d.ID = "metadata " + value + " differs from UUID " + m.UUID
			}
		case wmsink.MetadataEventType:
			d.Type = value
		case wmsink.MetadataEventKey:
			d.Key = value
		default:
			d.Headers[name] = value
		}
	}
	return d
}

// classifyRedis is what a service on Redis would pass as
// Config.Classify: a key of another type where the stream should be
// (WRONGTYPE) or a user without rights to it (NOPERM) is the set-up's
// to fix.
func classifyRedis(err error) wmsink.Class {
	var re redis.Error
	if errors.As(err, &re) {
		if msg := re.Error(); strings.HasPrefix(msg, "WRONGTYPE") || strings.HasPrefix(msg, "NOPERM") {
			return wmsink.Unavailable
		}
	}
	return wmsink.Retryable
}

// newSink is a sink with cfg's fields, closed when t ends.
func newSink(t testing.TB, cfg wmsink.Config) *wmsink.Sink {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = outboxtest.Logger(t)
	}
	s, err := wmsink.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func event(id, key string) outbox.Message {
	return outbox.Message{ID: id, Key: key, Type: "RoomGiftSent", Payload: []byte(`{"id":"` + id + `"}`),
		Headers: map[string]string{"traceparent": sinktest.TraceParent}}
}

// publish publishes msg with a deadline that only guards against a hang.
func publish(t testing.TB, s outbox.Sink, msg outbox.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Publish(ctx, msg)
}
