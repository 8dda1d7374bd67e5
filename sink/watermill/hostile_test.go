package watermill_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// forged are stored headers that pose as the sink's metadata or as
// Watermill's: watermill-redisstream refuses a message that has
// _watermill_message_uuid, and watermill-amqp's marshaler would let it
// override the UUID.
var forged = map[string]string{
	"outbox-event-id": "forged-id", "Outbox-Event-Key": "forged-key",
	"_watermill_message_uuid": "forged-uuid", "_WATERMILL_delayed_until": "2099-01-01T00:00:00Z",
	"x-kept": "kept",
}

// TestForgedHeadersOnBothBrokers: headers that pose as the sink's or
// Watermill's own are left out, on the real brokers, and the message
// arrives under its own ID and key.
func TestForgedHeadersOnBothBrokers(t *testing.T) {
	m := outbox.Message{ID: "forged-1", Key: "room-1", Type: "T", Payload: []byte("p"), Headers: forged}
	check := func(t *testing.T, got []*message.Message) {
		require.Len(t, got, 1)
		require.Equal(t, "forged-1", got[0].UUID)
		d := delivery(got[0])
		require.Equal(t, "forged-1", d.ID)
		require.Equal(t, "room-1", d.Key)
		require.Equal(t, map[string]string{"x-kept": "kept"}, d.Headers)
	}
	t.Run("RabbitMQ", func(t *testing.T) {
		url := sharedAMQP(t)
		queue := randomName("hostile-")
		c := consumeAMQP(t, url, queue)
		t.Cleanup(func() { deleteQueue(t, url, queue) })
		s := newSink(t, wmsink.Config{Publisher: amqpPublisher(t, url), Topic: queue})
		require.NoError(t, publish(t, s, m))
		outboxtest.Eventually(t, "received", func() bool { return len(c.Messages()) > 0 })
		check(t, c.Messages())
	})
	t.Run("Redis", func(t *testing.T) {
		c := sharedRedisClient(t)
		stream := randomName("hostile-")
		t.Cleanup(func() { _ = c.Del(context.Background(), stream).Err() })
		s := newSink(t, wmsink.Config{Publisher: redisPublisher(t, c), Topic: stream})
		require.NoError(t, publish(t, s, m))
		got, err := readStream(c, stream)
		require.NoError(t, err)
		check(t, got)
	})
}

// TestLongHeaderNameOverAMQP: AMQP field names are at most 255 bytes,
// and amqp091-go cuts a longer one to its length modulo 256 without an
// error: without a check the message arrives with another header. With
// CheckAMQP as Config.Check it fails permanently and nothing is sent.
func TestLongHeaderNameOverAMQP(t *testing.T) {
	url := sharedAMQP(t)
	queue := randomName("hostile-")
	c := consumeAMQP(t, url, queue)
	t.Cleanup(func() { deleteQueue(t, url, queue) })
	pub := amqpPublisher(t, url)
	long := outbox.Message{ID: "long-name", Key: "k", Type: "T", Headers: map[string]string{strings.Repeat("n", 300): "v"}}

	checked := newSink(t, wmsink.Config{Publisher: pub, Topic: queue, Check: wmsink.CheckAMQP})
	err := publish(t, checked, long)
	require.True(t, outbox.IsPermanent(err), "%v", err)
	require.ErrorIs(t, err, wmsink.ErrUnsendable)
	require.ErrorContains(t, err, "is 300 bytes; AMQP field names are at most 255")

	unchecked := newSink(t, wmsink.Config{Publisher: pub, Topic: queue})
	require.NoError(t, publish(t, unchecked, long), "amqp091-go reports nothing")
	outboxtest.Eventually(t, "received", func() bool { return len(c.Messages()) > 0 })
	got := delivery(c.Messages()[0])
	require.Equal(t, "long-name", got.ID, "only the unchecked copy arrived")
	require.Equal(t, map[string]string{strings.Repeat("n", 300%256): "v"}, got.Headers, "the name arrives cut: why CheckAMQP exists")
}
