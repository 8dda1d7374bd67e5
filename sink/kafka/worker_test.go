package kafka_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// enqueue writes msgs to store in one transaction.
func enqueue(t *testing.T, store *outboxtest.Store, msgs ...outbox.Message) {
	t.Helper()
	tx := store.Begin()
	require.NoError(t, store.Enqueue(context.Background(), tx, nil, msgs...))
	require.NoError(t, tx.Commit())
}

// batch is n messages from first on, keyed over keys keys.
func batch(first, n, keys int) []outbox.Message {
	var ms []outbox.Message
	for i := first; i < first+n; i++ {
		ms = append(ms, message(fmt.Sprintf("w-%04d", i), fmt.Sprintf("room-%d", i%keys)))
	}
	return ms
}

// runWorker runs a worker with Ordering on store and sink until the test
// ends; it returns a function that stops it and waits.
func runWorker(t *testing.T, store *outboxtest.Store, sink outbox.Sink, concurrency int) (stop func()) {
	t.Helper()
	w, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{
		Ordering: true, Concurrency: concurrency, PollInterval: 10 * time.Millisecond,
		Retry:   outbox.FixedInterval{Interval: 10 * time.Millisecond},
		Breaker: outbox.SinkBreaker{MaxProbeInterval: 100 * time.Millisecond},
		Logger:  outboxtest.Logger(t),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func pending(t *testing.T, store *outboxtest.Store) int {
	t.Helper()
	st, err := store.Stats(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Dead, "no dead letters")
	return st.Pending
}

// requireDeliveredInOrder checks that the topic holds every message of
// sent at least once, and that the first copies of each key's messages
// are in the order sent.
func requireDeliveredInOrder(t *testing.T, recs []*kgo.Record, sent []outbox.Message) {
	t.Helper()
	seen := map[string]bool{}
	firsts := map[string][]string{}
	for _, r := range recs {
		id := eventID(t, r)
		if !seen[id] {
			seen[id] = true
			firsts[string(r.Key)] = append(firsts[string(r.Key)], id)
		}
	}
	want := map[string][]string{}
	for _, m := range sent {
		require.True(t, seen[m.ID], "%s was lost", m.ID)
		want[m.Key] = append(want[m.Key], m.ID)
	}
	require.Equal(t, want, firsts, "order of first copies per key")
}

// TestBrokersGoAwayAndComeBack: a worker delivers through the sink while
// the whole cluster stops (its state kept on disk, as a Kafka cluster
// keeps its logs) and starts again on the same ports; nothing is lost,
// each key stays in order, and nothing is dead-lettered.
func TestBrokersGoAwayAndComeBack(t *testing.T) {
	dir := t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, topic), kfake.DataDir(dir))
	require.NoError(t, err)
	addrs := c.ListenAddrs()
	var ports []int
	for _, a := range addrs {
		_, p, err := net.SplitHostPort(a)
		require.NoError(t, err)
		n, err := strconv.Atoi(p)
		require.NoError(t, err)
		ports = append(ports, n)
	}
	t.Cleanup(func() { c.Close() })

	store := outboxtest.NewStore()
	s := newSink(t, addrs, kafka.Config{})
	sent := batch(0, 300, 7)
	enqueue(t, store, sent[:200]...)
	stop := runWorker(t, store, s, 4)
	outboxtest.Eventually(t, "some delivered", func() bool { return pending(t, store) < 150 })

	c.Close()
	enqueue(t, store, sent[200:]...)
	outboxtest.Eventually(t, "the worker meets the outage", func() bool {
		for _, m := range sent {
			if r, err := store.Get(context.Background(), m.ID); err == nil && r.LastError != "" {
				return true
			}
		}
		return false
	})
	for _, m := range sent {
		if r, _ := store.Get(context.Background(), m.ID); r.LastError != "" {
			t.Logf("during the outage: %q", r.LastError)
			break
		}
	}

	c, err = kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(ports...), kfake.DataDir(dir))
	require.NoError(t, err)
	outboxtest.Eventually(t, "all delivered", func() bool { return pending(t, store) == 0 })
	stop()
	requireDeliveredInOrder(t, consume(t, addrs, topic), sent)
}

// TestLeadersMove: partition leaders move between brokers while a worker
// delivers; franz-go follows them, nothing is lost and each key stays in
// order.
func TestLeadersMove(t *testing.T) {
	c := cluster(t)
	store := outboxtest.NewStore()
	s := newSink(t, c.ListenAddrs(), kafka.Config{})
	sent := batch(0, 600, 11)
	enqueue(t, store, sent...)
	runWorker(t, store, s, 8)
	// Move every leader each time another 30 records are delivered.
	for left := pending(t, store); left > 0; {
		for p := range int32(partitions) {
			require.NoError(t, c.MoveTopicPartition(topic, p, (c.LeaderFor(topic, p)+1)%3))
		}
		before := left
		outboxtest.Eventually(t, "30 more delivered", func() bool {
			left = pending(t, store)
			return left == 0 || left <= before-30
		})
	}
	requireDeliveredInOrder(t, consume(t, c.ListenAddrs(), topic), sent)
}
