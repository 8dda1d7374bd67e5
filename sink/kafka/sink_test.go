package kafka_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// TestDeliversWithHeaders: the payload is the value, the key the key, the
// event ID and type travel as headers, then the message's own headers in
// name order; reserved names are left out and logged.
func TestDeliversWithHeaders(t *testing.T) {
	c := cluster(t)
	var logs bytes.Buffer
	s := newSink(t, c.ListenAddrs(), kafka.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	m := message("e-1", "room-1")
	m.Headers["b-request-id"] = "r-7"
	m.Headers["a-empty"] = ""
	m.Headers["Outbox-Event-ID"] = "e-999"  // would name another event
	m.Headers["outbox-event-type"] = "Fake" // would name another type
	require.NoError(t, publish(t, s, m))
	require.NoError(t, publish(t, s, outbox.Message{ID: "e-2", Type: "RoomCreated"}), "no key, no payload, no headers")

	recs := consume(t, c.ListenAddrs(), topic)
	require.Len(t, recs, 2)
	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		byID[eventID(t, r)] = r
	}
	r := byID["e-1"]
	require.Equal(t, "room-1", string(r.Key))
	require.Equal(t, m.Payload, r.Value)
	var names, values []string
	for _, h := range r.Headers {
		names, values = append(names, h.Key), append(values, string(h.Value))
	}
	require.Equal(t, []string{kafka.HeaderEventID, kafka.HeaderEventType, "a-empty", "b-request-id", "traceparent"}, names)
	require.Equal(t, []string{"e-1", "RoomGiftSent", "", "r-7", m.Headers["traceparent"]}, values)
	require.Contains(t, logs.String(), "reserved headers not forwarded")
	require.Contains(t, logs.String(), "Outbox-Event-ID")

	r = byID["e-2"]
	require.Nil(t, r.Key, "an empty Key is no key: spread over the partitions")
	require.Empty(t, r.Value)
	typ, ok := header(r, kafka.HeaderEventType)
	require.True(t, ok)
	require.Equal(t, "RoomCreated", typ)
}

// TestKeyChoosesPartition: every record of a key lands in one partition,
// in the order one producer published them, and another producer (a new
// client, as after a restart) maps each key to the same partition.
func TestKeyChoosesPartition(t *testing.T) {
	c := cluster(t)
	first := newSink(t, c.ListenAddrs(), kafka.Config{})
	second := newSink(t, c.ListenAddrs(), kafka.Config{})
	const keys, perKey = 12, 20
	var wg sync.WaitGroup
	errs := make(chan error, keys*perKey)
	for k := range keys {
		wg.Go(func() {
			// One goroutine per key, publishing its messages one after
			// the other (as the worker does with Ordering), the keys at
			// once, half of each through each sink.
			for i := range perKey {
				s := first
				if i >= perKey/2 {
					s = second
				}
				errs <- publish(t, s, message(fmt.Sprintf("k%02d-%03d", k, i), fmt.Sprintf("room-%d", k)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	recs := consume(t, c.ListenAddrs(), topic)
	require.Len(t, recs, keys*perKey)
	partitionOf := map[string]int32{}
	order := map[string][]string{}
	used := map[int32]bool{}
	for _, r := range recs { // in partition and offset order
		key := string(r.Key)
		if p, seen := partitionOf[key]; seen {
			require.Equal(t, p, r.Partition, "key %s in two partitions", key)
		}
		partitionOf[key] = r.Partition
		used[r.Partition] = true
		order[key] = append(order[key], eventID(t, r))
	}
	for k := range keys {
		key := fmt.Sprintf("room-%d", k)
		var want []string
		for i := range perKey {
			want = append(want, fmt.Sprintf("k%02d-%03d", k, i))
		}
		require.Equal(t, want, order[key], "offset order of %s", key)
	}
	require.Greater(t, len(used), 1, "keys spread over the partitions")
}

// TestConcurrentPublishesWaitForTheirOwnAck: Publish returns nil only
// once its own record is written, whatever the other goroutines' records
// do; every record a Publish reported is there.
func TestConcurrentPublishesWaitForTheirOwnAck(t *testing.T) {
	c := cluster(t)
	s := newSink(t, c.ListenAddrs(), kafka.Config{})
	const n = 400
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for g := range 8 {
		wg.Go(func() {
			for i := range n / 8 {
				id := fmt.Sprintf("g%d-%03d", g, i)
				if err := publish(t, s, message(id, fmt.Sprintf("room-%d", i%5))); err == nil {
					ids <- id
				}
			}
		})
	}
	wg.Wait()
	close(ids)
	got := map[string]bool{}
	for _, r := range consume(t, c.ListenAddrs(), topic) {
		got[eventID(t, r)] = true
	}
	count := 0
	for id := range ids {
		require.True(t, got[id], "%s was reported published but is not in the topic", id)
		count++
	}
	require.Equal(t, n, count)
}

// TestCallerOwnsItsClient: a sink on the caller's client publishes
// through it and leaves it open at Close; its later Publish calls fail,
// retryably.
func TestCallerOwnsItsClient(t *testing.T) {
	c := cluster(t)
	cl := adminClient(t, c.ListenAddrs())
	s := newSink(t, nil, kafka.Config{Client: cl})
	require.NoError(t, publish(t, s, message("e-1", "room-1")))
	s.Close()
	s.Close() // twice is fine
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(), "the client is still open")
	err := publish(t, s, message("e-2", "room-1"))
	requireClass(t, err, kafka.Retryable, "e-2", "sink closed")
	require.ErrorIs(t, err, kafka.ErrClosed)
}

// TestCloseEndsPublishes: Publish calls waiting when the sink closes
// its own client return a retryable error; later ones too.
func TestCloseEndsPublishes(t *testing.T) {
	c := cluster(t)
	s := newSink(t, c.ListenAddrs(), kafka.Config{})
	require.NoError(t, publish(t, s, message("e-1", "room-1")))
	c.Close() // nothing answers now
	errs := make(chan error, 4)
	for i := range 4 {
		go func() { errs <- publish(t, s, message(fmt.Sprintf("e-%d", i+2), "room-1")) }()
	}
	s.Close()
	for range 4 {
		err := <-errs
		require.Error(t, err)
		require.False(t, outbox.IsPermanent(err), "%v", err)
		require.False(t, outbox.IsUnavailable(err), "%v", err)
	}
}
