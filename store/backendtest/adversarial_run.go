package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// fate is what the hostile sink does with one message.
type fate int

const (
	fateDeliver   fate = iota // published at the first try
	fateFailTwice             // two hostile errors, then published
	fatePanic                 // a hostile panic, then published
	fateDead                  // a permanent hostile error: dead
)

func (f fate) String() string {
	return [...]string{"deliver", "fail twice", "panic once", "dead"}[f]
}

// fateOf spreads the fates over the messages, so that every key gets
// some of each.
func fateOf(i int) fate {
	switch i % 10 {
	case 1, 4:
		return fateFailTwice
	case 6:
		return fatePanic
	case 8:
		return fateDead
	}
	return fateDeliver
}

// hostileSink plays each message's fate and checks that what it is
// handed is what was enqueued.
type hostileSink struct {
	sent map[string]outbox.Message // read-only once workers run
	fate map[string]fate

	mu        sync.Mutex
	calls     map[string]int
	delivered []outbox.Message
	finished  map[string]bool // delivered, or failed for good
	corrupted []string

	keys keyOverlaps // publishes of one key at once
}

func (s *hostileSink) Publish(ctx context.Context, m outbox.Message) error {
	s.mu.Lock()
	s.calls[m.ID]++
	try := s.calls[m.ID]
	if want, ok := s.sent[m.ID]; !ok || !sameMessage(want, m) {
		s.corrupted = append(s.corrupted, m.ID)
	}
	s.mu.Unlock()
	defer s.keys.begin(m.Key)()
	texts := HostileTexts()
	text := texts[(try+len(m.ID))%len(texts)]
	switch s.fate[m.ID] {
	case fateFailTwice:
		if try <= 2 {
			return errors.New(text)
		}
	case fatePanic:
		if try == 1 {
			hostilePanic(int(m.ID[len(m.ID)-1]))
		}
	case fateDead:
		s.finish(m.ID)
		return outbox.Permanent(errors.New(text))
	}
	s.mu.Lock()
	s.delivered = append(s.delivered, m)
	s.mu.Unlock()
	s.finish(m.ID)
	return nil
}

func (s *hostileSink) finish(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished[id] = true
}

// allFinished reports whether every message has had its last call: its
// delivery, or its permanent failure.
func (s *hostileSink) allFinished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.finished) == len(s.sent)
}

func sameMessage(a, b outbox.Message) bool {
	return a.ID == b.ID && a.Key == b.Key && a.Type == b.Type && bytes.Equal(a.Payload, b.Payload) && maps.Equal(a.Headers, b.Headers)
}

// hostileMessage is message seq of the k-th accepted key: a payload that
// is not UTF-8 and headers full of control characters.
func hostileMessage(k int, key string, seq int) outbox.Message {
	return outbox.Message{
		ID: fmt.Sprintf("k%03d-%d", k, seq), Key: key, Type: fmt.Sprintf("T\t%d\x00", seq%3),
		Payload: append([]byte{0xff, 0, byte(seq)}, key...),
		Headers: map[string]string{"request_id": fmt.Sprintf("r\r\n%d", seq), "x-key\x01": key, "empty": ""},
	}
}

// testAdversarialRun delivers messages of every hostile key through
// three workers and the hostile sink, and checks the promises.
func testAdversarialRun(t *testing.T, h Harness, ordering bool) {
	const perKey = 10
	var keys []string
	for _, key := range HostileKeys() {
		if key != "" { // unkeyed messages are added below, in bulk
			keys = append(keys, key)
		}
	}
	sink := &hostileSink{sent: map[string]outbox.Message{}, fate: map[string]fate{}, calls: map[string]int{}, finished: map[string]bool{}}
	accepted, rejected := enqueueHostile(t, h, keys, perKey, sink)

	logs := &outboxtest.LogBuffer{}
	events := &eventLog{}
	for i := range 3 {
		store := h.Store
		if i > 0 {
			store = h.OpenStore(t)
		}
		w := newWorker(t, store, sink, outbox.WorkerOptions{
			NodeID: fmt.Sprintf("hostile-%d", i), BatchSize: 7, Concurrency: 1 + 3*(i%2), Ordering: ordering,
			Logger: slogJSON(logs), Observer: events,
		})
		runWorker(t, w)
	}
	waitRunSettled(t, h, sink)
	outcomes := checkHostileOutcomes(t, h, sink)

	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Empty(t, sink.corrupted, "the sink was handed messages that differ from what was enqueued")
	dups := map[string]int{}
	for _, m := range sink.delivered {
		dups[m.ID]++
	}
	maps.DeleteFunc(dups, func(_ string, n int) bool { return n == 1 })
	leaseLost := strings.Count(logs.String(), "outbox lease lost before settle")
	settleFailed := events.kinds()[outbox.EventSettleFailed]
	if len(dups) > 0 {
		require.Positive(t, leaseLost+settleFailed, "duplicates %v without a lost lease or a failed settle", dups)
	}
	if ordering {
		requireHostileKeyOrder(t, sink.delivered, sink.fate)
		sink.keys.requireNone(t)
	}
	t.Logf("adversarial run (ordering %v): %d messages over %d keys and the empty key (%d keys rejected: %q); outcomes %v; "+
		"%d sink calls; %d duplicates (%d lost leases, %d failed settles)",
		ordering, len(sink.sent), len(accepted), len(rejected), rejected, outcomes, sumCalls(sink.calls), len(dups), leaseLost, settleFailed)
}

// waitRunSettled waits until every message of the run is published or
// dead: first until the sink has had each message's last call (cheap to
// ask), then until the store holds none of them pending. Polling the
// store from the start made each poll take seconds on a loaded machine
// (see waitSettled).
func waitRunSettled(t *testing.T, h Harness, sink *hostileSink) {
	t.Helper()
	outboxtest.EventuallyWithin(t, bulkWait, "the sink has had every message's last call", sink.allFinished)
	waitSettled(t, h.Store, slices.Collect(maps.Keys(sink.sent)))
}

// enqueueHostile writes perKey messages of every key, one transaction
// per round so that the writes of a key are serialized, and 20 unkeyed
// ones. A key the store rejects is left out (it must be rejected with
// ErrInvalidMessage).
func enqueueHostile(t *testing.T, h Harness, keys []string, perKey int, sink *hostileSink) (accepted, rejected []string) {
	t.Helper()
	ctx := context.Background()
	add := func(ms ...outbox.Message) {
		for _, m := range ms {
			sink.sent[m.ID] = m
			sink.fate[m.ID] = fateOf(len(sink.sent))
		}
	}
	for _, key := range keys {
		m := hostileMessage(len(accepted), key, 0)
		tx, err := h.Begin(ctx)
		require.NoError(t, err)
		if err := h.Store.Enqueue(ctx, tx, nil, m); err != nil {
			_ = tx.Rollback()
			require.ErrorIs(t, err, outbox.ErrInvalidMessage, "key %q", key)
			rejected = append(rejected, key)
			continue
		}
		require.NoError(t, tx.Commit())
		add(m)
		accepted = append(accepted, key)
	}
	for seq := 1; seq < perKey; seq++ {
		var round []outbox.Message
		for k, key := range accepted {
			round = append(round, hostileMessage(k, key, seq))
		}
		enqueue(t, h, outbox.EnqueueOptions{}, round...)
		add(round...)
	}
	var unkeyed []outbox.Message
	for i := range 20 {
		unkeyed = append(unkeyed, hostileMessage(999, "", i))
	}
	enqueue(t, h, outbox.EnqueueOptions{}, unkeyed...)
	add(unkeyed...)
	return accepted, rejected
}

// checkHostileOutcomes requires each message to end as its fate says, with
// the attempts it says, and returns the count of each outcome.
func checkHostileOutcomes(t *testing.T, h Harness, sink *hostileSink) map[string]int {
	t.Helper()
	wantAttempts := map[fate]int{fateDeliver: 0, fateFailTwice: 2, fatePanic: 1, fateDead: 1}
	counts := map[string]int{}
	for id, f := range sink.fate {
		r := get(t, h.Store, id)
		requireStoredText(t, r)
		want := outbox.StatusPublished
		if f == fateDead {
			want = outbox.StatusDead
		}
		require.Equal(t, want, r.Status, "%s (%v)", id, f)
		require.Equal(t, wantAttempts[f], r.Attempts, "%s (%v): the others are not affected", id, f)
		counts[string(r.Status)]++
	}
	if _, ok := h.Store.(backend.StatsReader); ok {
		st := statsOf(t, h.Store)
		require.Zero(t, st.Pending)
		require.Zero(t, st.Leased)
		require.Equal(t, counts[string(outbox.StatusDead)], st.Dead)
	}
	return counts
}

// requireHostileKeyOrder: per key, first deliveries come in seq order,
// skipping the dead.
func requireHostileKeyOrder(t *testing.T, delivered []outbox.Message, fates map[string]fate) {
	t.Helper()
	last := map[string]int{}
	seen := map[string]bool{}
	for _, m := range delivered {
		if m.Key == "" || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		var k, seq int
		_, err := fmt.Sscanf(m.ID, "k%d-%d", &k, &seq)
		require.NoError(t, err)
		prev, ok := last[m.Key]
		if !ok {
			prev = -1
		}
		require.Greater(t, seq, prev, "key %q: %s delivered after a later message", m.Key, m.ID)
		for skipped := prev + 1; skipped < seq; skipped++ {
			id := fmt.Sprintf("k%03d-%d", k, skipped)
			require.Equal(t, fateDead, fates[id], "key %q: %s delivered before %s", m.Key, m.ID, id)
		}
		last[m.Key] = seq
	}
}

func sumCalls(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}
