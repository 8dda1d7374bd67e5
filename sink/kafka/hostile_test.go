package kafka_test

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// TestHostileBytesTravelUnchanged: keys, payloads and header values are
// bytes to Kafka: invalid UTF-8, control characters, NUL, CR LF and
// emoji arrive as they were stored.
func TestHostileBytesTravelUnchanged(t *testing.T) {
	c := cluster(t)
	s := newSink(t, c.ListenAddrs(), kafka.Config{})
	msgs := []outbox.Message{
		{ID: "h-1", Type: "T", Key: "room-\xff\xfe", Payload: []byte("\x00\x01\xff"), Headers: map[string]string{"x-bin": "a\xffb"}},
		{ID: "h-2", Type: "T\r\nX-Injected: 1", Key: "\x00\r\n\x1b[31m", Headers: map[string]string{"x\r\ny": "\x1b[2J", "emoji-😀": "😀"}},
		{ID: "h-3\x00", Type: "T", Key: strings.Repeat("😀", outbox.MaxKeyLength)},
	}
	for _, m := range msgs {
		require.NoError(t, publish(t, s, m))
	}
	recs := consume(t, c.ListenAddrs(), topic)
	require.Len(t, recs, len(msgs))
	byID := map[string]outbox.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	for _, r := range recs {
		m, ok := byID[eventID(t, r)]
		require.True(t, ok)
		require.Equal(t, m.Key, string(r.Key))
		require.Equal(t, string(m.Payload), string(r.Value))
		typ, _ := header(r, kafka.HeaderEventType)
		require.Equal(t, m.Type, typ)
		for name, value := range m.Headers {
			got, once := header(r, name)
			require.True(t, once, name)
			require.Equal(t, value, got, name)
		}
	}
}

// TestRecordAtTheLimit: a record of exactly MaxRecordBytes goes through a
// topic whose max.message.bytes is the same; one byte more is refused
// before anything is sent.
func TestRecordAtTheLimit(t *testing.T) {
	c := cluster(t)
	const limit = 4096
	createTopic(t, c.ListenAddrs(), "small", 1, map[string]string{"max.message.bytes": fmt.Sprint(limit)})
	s := newSink(t, c.ListenAddrs(), kafka.Config{Topic: "small", MaxRecordBytes: limit, Compression: "none"})
	m := outbox.Message{ID: "e-1", Type: "T", Key: "k"}
	rec, err := s.Record(m)
	require.NoError(t, err)
	m.Payload = make([]byte, limit-kafka.RecordBytes(rec)+len(rec.Value)-2) // the value's length takes 2 bytes
	_, _ = rand.Read(m.Payload)
	rec, err = s.Record(m)
	require.NoError(t, err)
	require.Equal(t, limit, kafka.RecordBytes(rec))
	require.NoError(t, publish(t, s, m))

	m.ID, m.Payload = "e-2", append(m.Payload, 0)
	err = publish(t, s, m)
	requireClass(t, err, kafka.Permanent, "e-2", "message cannot be sent as stored: record is 4097 bytes")
	require.ErrorIs(t, err, kafka.ErrUnsendable)
	require.Len(t, consume(t, c.ListenAddrs(), "small"), 1)
}

// TestTooLargeForTheTopicFailsAlone: a payload over the topic's
// max.message.bytes (but within the sink's MaxRecordBytes) is refused by
// the broker and fails permanently, while the records of other Publish
// calls to the same partition at the same time, which franz-go fails
// with it, are delivered.
func TestTooLargeForTheTopicFailsAlone(t *testing.T) {
	c := cluster(t)
	createTopic(t, c.ListenAddrs(), "small", 1, map[string]string{"max.message.bytes": "4096"})
	s := newSink(t, c.ListenAddrs(), kafka.Config{Topic: "small"})
	big := message("big", "room-1")
	big.Payload = make([]byte, 8192)
	_, _ = rand.Read(big.Payload) // incompressible

	var wg sync.WaitGroup
	errs := make([]error, 64)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(errs); i += 4 {
				errs[i] = publish(t, s, message(fmt.Sprintf("small-%02d", i), "room-1"))
			}
		})
	}
	bigErr := publish(t, s, big)
	wg.Wait()
	requireClass(t, bigErr, kafka.Permanent, "big", "rejected by the broker as too large for the topic")
	for i, err := range errs {
		require.NoError(t, err, "small-%02d", i)
	}
	recs := consume(t, c.ListenAddrs(), "small")
	require.Len(t, recs, len(errs), "every small record once, the big one not at all")
}
