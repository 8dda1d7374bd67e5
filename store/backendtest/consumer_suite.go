package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// ConsumerHarness connects RunConsumerTests to a store implementation
// that serves several consumers of one outbox, each with its own
// delivery state (store/mysql: Store and Store.Consumer).
type ConsumerHarness struct {
	// Harness.Store is the default consumer, on a fresh, empty outbox.
	Harness
	// Consumer returns the store of a named consumer of the same outbox,
	// registered before the test enqueues anything, so that it gets every
	// message.
	Consumer func(t *testing.T, name string) backend.Store
}

// drain claims everything due in s, publishing it.
func drain(t *testing.T, s backend.Store) []string {
	t.Helper()
	var got []string
	for {
		b := claim(t, s, 7, time.Minute)
		if b.Len() == 0 {
			return got
		}
		var os []backend.Outcome
		for _, r := range b.Records {
			got = append(got, r.ID)
			os = append(os, backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished})
		}
		settle(t, s, b.Token, os...)
	}
}

func testEveryConsumerGetsEveryMessage(t *testing.T, h ConsumerHarness) {
	a, b := h.Consumer(t, "a"), h.Consumer(t, "b")
	ms := msgs("m", 30)
	enqueue(t, h.Harness, outbox.EnqueueOptions{}, ms...)
	want := ids(recordsOf(ms))
	require.ElementsMatch(t, want, drain(t, a))
	require.ElementsMatch(t, want, drain(t, h.Store), "the default consumer")
	require.ElementsMatch(t, want, drain(t, b), "b, after the others are done")
	for _, s := range []backend.Store{a, b, h.Store} {
		require.Empty(t, drain(t, s), "once each")
		require.Equal(t, outbox.StatusPublished, get(t, s, "m-3").Status)
	}
}

func testStateIsPerConsumer(t *testing.T, h ConsumerHarness) {
	ctx := context.Background()
	a, b := h.Consumer(t, "a"), h.Consumer(t, "b")
	enqueue(t, h.Harness, outbox.EnqueueOptions{}, msg("x"), msg("y"))

	ba := claim(t, a, 10, time.Minute)
	require.Equal(t, 2, ba.Len())
	settle(t, a, ba.Token,
		backend.Outcome{ID: "x", Kind: backend.OutcomeDead, Error: "a gives up"},
		backend.Outcome{ID: "y", Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: "a is down"})
	rx := get(t, a, "x")
	require.Equal(t, outbox.StatusDead, rx.Status)
	require.Equal(t, "a gives up", rx.LastError)
	require.Equal(t, 1, get(t, a, "y").Attempts)
	require.Zero(t, claim(t, a, 10, time.Minute).Len(), "nothing due for a")

	for _, s := range []backend.Store{b, h.Store} {
		r := get(t, s, "x")
		require.Equal(t, outbox.StatusPending, r.Status, "a's dead letter is a's alone")
		require.Zero(t, r.Attempts)
		require.Empty(t, r.LastError)
	}
	bb := claim(t, b, 10, time.Minute)
	require.ElementsMatch(t, []string{"x", "y"}, ids(bb.Records), "a's failures do not hold b up")
	settle(t, b, bb.Token, backend.Outcome{ID: "x", Kind: backend.OutcomePublished}, backend.Outcome{ID: "y", Kind: backend.OutcomePublished})
	require.Equal(t, outbox.StatusDead, get(t, a, "x").Status, "b's outcome is b's alone")
	_, err := a.Get(ctx, "nope")
	require.ErrorIs(t, err, outbox.ErrNotFound)
}

func testLeasesArePerConsumer(t *testing.T, h ConsumerHarness) {
	a, b := h.Consumer(t, "a"), h.Consumer(t, "b")
	enqueue(t, h.Harness, outbox.EnqueueOptions{}, msg("x"))
	ba := claim(t, a, 10, time.Hour)
	require.Equal(t, 1, ba.Len())
	bd := claim(t, h.Store, 10, time.Hour)
	require.Equal(t, 1, bd.Len(), "a's lease does not hide x from the default consumer")
	bb := claim(t, b, 10, time.Hour)
	require.Equal(t, 1, bb.Len(), "nor from b")

	// A token fences only its own consumer's records.
	res := settle(t, b, ba.Token, backend.Outcome{ID: "x", Kind: backend.OutcomePublished})
	require.Equal(t, 1, res.Stale, "a's token settles nothing of b's")
	require.Equal(t, outbox.StatusPending, get(t, b, "x").Status)
	require.Equal(t, 1, settle(t, a, ba.Token, backend.Outcome{ID: "x", Kind: backend.OutcomePublished}).Applied)
	require.Equal(t, outbox.StatusPending, get(t, b, "x").Status)
	require.Equal(t, outbox.StatusPending, get(t, h.Store, "x").Status)
}

func testOrderIsHeldPerConsumer(t *testing.T, h ConsumerHarness) {
	a, b := h.Consumer(t, "a"), h.Consumer(t, "b")
	enqueue(t, h.Harness, outbox.EnqueueOptions{}, msg("k1"), msg("k2"), msg("k3")) // one key
	ordered := func(s backend.Store) backend.Batch {
		t.Helper()
		batch, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		return batch
	}
	ba := ordered(a)
	keyPrefixes(t, ba, map[string][]string{"order-1": {"k1", "k2", "k3"}}, nil, true)
	settleOrdered(t, a, ba, map[string]backend.Outcome{"k1": {Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: "a fails the head"}})
	require.Zero(t, ordered(a).Len(), "a's failing head holds a's key")

	var got []string
	for len(got) < 3 {
		bb := ordered(b)
		require.NotZero(t, bb.Len(), "b goes on")
		got = append(got, ids(bb.Records)...)
		settleOrdered(t, b, bb, nil)
	}
	require.Equal(t, []string{"k1", "k2", "k3"}, got, "b goes on in order")
	require.Zero(t, ordered(a).Len(), "and a still waits")
}

// testHeadStartIsTheEnqueuingConsumers: a head start keeps a message from
// the workers of the consumer whose store enqueued it (whose writer
// publishes it after commit); every other consumer may deliver it at
// once. (Before, the default consumer's head start went with the message
// to every named consumer, which got every event DefaultHeadStart late.)
func testHeadStartIsTheEnqueuingConsumers(t *testing.T, h ConsumerHarness) {
	a, b := h.Consumer(t, "a"), h.Consumer(t, "b")
	enqueue(t, h.Harness, outbox.EnqueueOptions{HeadStart: time.Hour}, msg("by-default"))
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "the default consumer's head start")
	for name, s := range map[string]backend.Store{"a": a, "b": b} {
		require.Equal(t, []string{"by-default"}, ids(claim(t, s, 10, time.Minute).Records), "%s: due at once", name)
	}

	tx, err := h.Begin(context.Background())
	require.NoError(t, err)
	require.NoError(t, a.Enqueue(context.Background(), tx, &outbox.EnqueueOptions{HeadStart: time.Hour}, msg("by-a")))
	require.NoError(t, tx.Commit())
	require.Zero(t, claim(t, a, 10, time.Minute).Len(), "a's head start")
	require.Equal(t, []string{"by-a"}, ids(claim(t, b, 10, time.Minute).Records), "b: due at once")
	require.Equal(t, []string{"by-a"}, ids(claim(t, h.Store, 10, time.Minute).Records), "the default consumer: due at once")
	require.Equal(t, outbox.StatusPending, get(t, a, "by-a").Status)
	require.True(t, get(t, a, "by-a").NextAttemptAt.After(time.Now().Add(30*time.Minute)), "a's record waits out the head start")
}
