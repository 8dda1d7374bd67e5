package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

func testPermanentIsDead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("ok"), msg("poison"))
	groupGone := errors.New("downstream: 404 the queue does not exist")
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailIf(func(m outbox.Message) error {
		if m.ID == "poison" {
			return outbox.Permanent(groupGone)
		}
		return nil
	})
	hook, calls := deadRecorder()
	// The default policy: fixed interval, forever, but not for permanent errors.
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{OnDead: hook})

	require.Equal(t, outbox.BatchResult{Claimed: 2, Published: 1, Dead: 1}, processBatch(t, w))
	r := get(t, h.Store, "poison")
	require.Equal(t, outbox.StatusDead, r.Status, "kept, never deleted")
	require.Equal(t, 1, r.Attempts)
	require.Contains(t, r.LastError, "404 the queue does not exist")

	got := calls()
	require.Len(t, got, 1)
	require.Equal(t, "poison", got[0].rec.ID)
	require.Equal(t, outbox.StatusDead, got[0].rec.Status)
	require.Equal(t, 1, got[0].rec.Attempts)
	require.ErrorIs(t, got[0].err, groupGone)

	sink.FailIf(nil)
	require.Zero(t, processBatch(t, w).Claimed, "a dead letter is never retried")
	require.Equal(t, outbox.StatusDead, get(t, h.Store, "poison").Status)
}

func testMaxAttemptsDead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("flaky"))
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailIf(func(outbox.Message) error { return errors.New("still down") })
	hook, calls := deadRecorder()
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{
		Retry:  outbox.MaxAttempts{Policy: outbox.FixedInterval{Interval: time.Millisecond}, Attempts: 3},
		OnDead: hook,
	})
	for attempt := 1; attempt <= 3; attempt++ {
		outboxtest.Eventually(t, fmt.Sprintf("attempt %d", attempt), func() bool { return processBatch(t, w).Claimed == 1 })
		r := get(t, h.Store, "flaky")
		require.Equal(t, attempt, r.Attempts)
		if attempt < 3 {
			require.Equal(t, outbox.StatusPending, r.Status)
		}
	}
	r := get(t, h.Store, "flaky")
	require.Equal(t, outbox.StatusDead, r.Status, "given up after the third failure")
	require.Equal(t, "still down", r.LastError)
	require.Len(t, calls(), 1)
}

func testDeadHookPanics(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("p1"), msg("p2"))
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailIf(func(outbox.Message) error { return outbox.Permanent(errors.New("bad")) })
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{
		OnDead: func(context.Context, outbox.Record, error) { panic("alerting is down") },
	})
	require.Equal(t, 2, processBatch(t, w).Dead)
	requireStatus(t, h.Store, outbox.StatusDead, "p1", "p2")
}

// keyedSeq is a test message with its key and its place in the key.
func keyedSeq(key string, seq int) outbox.Message {
	p, _ := json.Marshal(map[string]any{"key": key, "seq": seq})
	return outbox.Message{ID: fmt.Sprintf("%s-%03d", key, seq), Key: key, Type: "T", Payload: p}
}

// keyOverlaps checks what ordering promises of a sink's calls: never two
// publishes of one key at once. Its methods are safe for concurrent use;
// the zero value is ready.
type keyOverlaps struct {
	mu       sync.Mutex
	inFlight map[string]int
	overlaps int // how often a publish began while another of its key was in flight
}

// begin counts a publish of key as in flight until the end it returns is
// called. Unkeyed messages (key "") have no order and are not counted.
func (k *keyOverlaps) begin(key string) (end func()) {
	if key == "" {
		return func() {}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inFlight == nil {
		k.inFlight = map[string]int{}
	}
	k.inFlight[key]++
	if k.inFlight[key] > 1 {
		k.overlaps++
	}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.inFlight[key]--
	}
}

// requireNone fails t if two publishes of one key were ever in flight at
// once.
func (k *keyOverlaps) requireNone(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	require.Zero(t, k.overlaps, "two publishes of one key were in flight at once")
}

// orderSink wraps a sink and checks, in its keyOverlaps, that no two
// publishes of one key run at once.
type orderSink struct {
	next outbox.Sink
	keyOverlaps
}

func (s *orderSink) Publish(ctx context.Context, m outbox.Message) error {
	defer s.begin(m.Key)()
	time.Sleep(time.Millisecond) // widen the window in which an overlap would show
	return s.next.Publish(ctx, m)
}

// requireKeyOrder checks that, per key, first deliveries came in seq order.
func requireKeyOrder(t *testing.T, delivered []outbox.Message) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	for _, m := range delivered {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		var p struct {
			Seq int `json:"seq"`
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		require.Equal(t, next[m.Key], p.Seq, "key %s: %s delivered before its predecessor", m.Key, m.ID)
		next[m.Key]++
	}
}

func testOrderingThreeWorkers(t *testing.T, h Harness) {
	const keys, perKey = 12, 25
	var held = map[string]bool{"k-00": true, "k-01": true, "k-02": true}
	// Writes of one key are serialized (here: one transaction per round),
	// which is what enqueue order rests on.
	for seq := range perKey {
		var round []outbox.Message
		for k := range keys {
			round = append(round, keyedSeq(fmt.Sprintf("k-%02d", k), seq))
		}
		enqueue(t, h, outbox.EnqueueOptions{}, round...)
	}
	rec := outboxtest.NewRecorder()
	var mu sync.Mutex
	flaky := outboxtest.NewFlakySink(rec, 7)
	flaky.SetFailRate(0.2)
	flaky.FailIf(func(m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if held[m.Key] {
			return errors.New("this key's downstream is down")
		}
		return nil
	})
	check := &orderSink{next: flaky}
	for i := range 3 {
		w := newWorker(t, h.OpenStore(t), check, outbox.WorkerOptions{NodeID: fmt.Sprintf("ordered-%d", i), BatchSize: 5, Ordering: true})
		runWorker(t, w)
	}

	// The unaffected keys flow to the end while the three heads keep failing.
	waitDistinct(t, rec, (keys-len(held))*perKey)
	for _, m := range rec.Messages() {
		require.False(t, held[m.Key], "%s was delivered behind its failing head", m.ID)
	}
	mu.Lock()
	held = map[string]bool{}
	mu.Unlock()
	waitDistinct(t, rec, keys*perKey)

	requireKeyOrder(t, rec.Messages())
	check.requireNone(t)
}

func testOrderingPublishNow(t *testing.T, h Harness) {
	rec := outboxtest.NewRecorder()
	sink := outboxtest.NewFlakySink(rec, 1)
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Ordering: true})
	cmd := []outbox.Message{keyedSeq("order", 0), keyedSeq("order", 1), keyedSeq("order", 2)}
	ctx := context.Background()
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: time.Hour}, cmd...))
	require.NoError(t, tx.Commit())

	sink.FailIf(func(m outbox.Message) error {
		if m.ID == "order-001" {
			return errors.New("busy")
		}
		return nil
	})
	require.Error(t, w.PublishNow(ctx, cmd...))
	require.Equal(t, []string{"order-000"}, msgIDs(rec.Messages()), "order-002 must not overtake the failed order-001")
	require.Equal(t, outbox.StatusPending, get(t, h.Store, "order-002").Status)

	sink.FailIf(nil)
	outboxtest.Eventually(t, "the worker delivers the rest in order", func() bool { return processBatch(t, w).Published == 0 && rec.Len() == 3 })
	requireKeyOrder(t, rec.Messages())
}

// slowSink takes a while per call and records concurrency per key. Its
// calls wait until gather of them have been in flight at once (or
// outboxtest.WaitTimeout has passed), so that a worker that makes that
// many calls at once is seen to do so however its goroutines are
// scheduled: with the delay alone, a loaded machine could start the last
// of them after the first had ended.
type slowSink struct {
	delay    time.Duration
	gather   int
	gathered chan struct{}
	once     sync.Once
	mu       sync.Mutex
	inFlight int
	maxSeen  int
	perKey   map[string]int
	overlap  int
	order    map[string][]string
}

func (s *slowSink) Publish(_ context.Context, m outbox.Message) error {
	s.mu.Lock()
	s.inFlight++
	s.maxSeen = max(s.maxSeen, s.inFlight)
	s.perKey[m.Key]++
	if s.perKey[m.Key] > 1 {
		s.overlap++
	}
	s.order[m.Key] = append(s.order[m.Key], m.ID)
	if s.inFlight == s.gather {
		s.once.Do(func() { close(s.gathered) })
	}
	s.mu.Unlock()
	select {
	case <-s.gathered:
	case <-time.After(outboxtest.WaitTimeout):
		s.once.Do(func() { close(s.gathered) }) // the test fails on maxSeen, once
	}
	time.Sleep(s.delay) // the sink's latency, not synchronisation
	s.mu.Lock()
	s.inFlight--
	s.perKey[m.Key]--
	s.mu.Unlock()
	return nil
}

func testConcurrency(t *testing.T, h Harness) {
	var ms []outbox.Message // each key's records next to each other in the batch
	for k := range 8 {
		for i := range 5 {
			ms = append(ms, outbox.Message{ID: fmt.Sprintf("c-%d-%d", k, i), Key: fmt.Sprintf("key-%d", k), Type: "T"})
		}
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	sink := &slowSink{delay: 20 * time.Millisecond, gather: 4, gathered: make(chan struct{}), perKey: map[string]int{}, order: map[string][]string{}}
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{BatchSize: 40, Concurrency: 4})
	res := processBatch(t, w)
	require.Equal(t, 4, sink.maxSeen, "up to Concurrency calls at once")
	require.Equal(t, 40, res.Published)
	require.Zero(t, sink.overlap, "never two calls for one key at once")
	for k := range 8 {
		var want []string
		for i := range 5 {
			want = append(want, fmt.Sprintf("c-%d-%d", k, i))
		}
		require.Equal(t, want, sink.order[fmt.Sprintf("key-%d", k)], "a key's records in order")
	}
}

func testNotify(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("primer"))
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{PollInterval: time.Hour})
	runWorker(t, w)
	waitDistinct(t, rec, 1) // the first round is over; the next is an hour away
	enqueue(t, h, outbox.EnqueueOptions{}, msg("woken"))
	w.Notify()
	waitDistinct(t, rec, 2)
}

func testCarriedSettle(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("full", 10)...)
	rec := outboxtest.NewRecorder()
	w := newWorker(t, h.Store, rec, outbox.WorkerOptions{BatchSize: 5, PollInterval: time.Hour})
	stop := runWorker(t, w)
	waitDistinct(t, rec, 10)
	// Two full batches: their outcomes ride on the following claims; the
	// last one on a claim that finds nothing, or on the way out.
	outboxtest.Eventually(t, "every record is published", func() bool {
		for _, m := range msgs("full", 10) {
			if get(t, h.Store, m.ID).Status != outbox.StatusPublished {
				return false
			}
		}
		return true
	})
	stop()
	require.Equal(t, 10, rec.Len())
}

// testOrderedKeepsUp: an ordered worker claims one record per key at a
// time, so that with few keys its batches are never full; after a round
// that left due work behind its heads it claims again at once, not after
// PollInterval (an hour here: without that, 3 keys of 40 records each
// took 40 poll intervals to drain; on MariaDB at 200 events/s a named
// consumer's backlog grew without bound at the default settings).
func testOrderedKeepsUp(t *testing.T, h Harness) {
	const perKey = 40
	var ms []outbox.Message
	for i := range perKey {
		for _, k := range []string{"A", "B", "C"} {
			ms = append(ms, keyed(fmt.Sprintf("%s-%02d", k, i), k))
		}
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	var (
		mu  sync.Mutex
		got = map[string][]string{}
		n   int
	)
	done := make(chan struct{})
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.Key] = append(got[m.Key], m.ID)
		if n++; n == len(ms) {
			close(done)
		}
		return nil
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{Ordering: true, PollInterval: time.Hour, BatchSize: 100})
	stop := runWorker(t, w)
	defer stop()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("delivered %d of %d: the worker waited for PollInterval with due work left", n, len(ms))
	}
	stop()
	for _, k := range []string{"A", "B", "C"} {
		want := make([]string, perKey)
		for i := range want {
			want[i] = fmt.Sprintf("%s-%02d", k, i)
		}
		require.Equal(t, want, got[k], "key %s in order", k)
	}
}
