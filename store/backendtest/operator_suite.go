package backendtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// queueOf returns h's store as a backend.Queue.
func queueOf(t *testing.T, h Harness) backend.Queue {
	t.Helper()
	q, ok := h.Store.(backend.Queue)
	require.True(t, ok, "%T does not implement backend.Queue", h.Store)
	return q
}

// killAll makes the records dead the way a worker does: claim, then
// settle dead with errText.
func killAll(t *testing.T, s backend.Store, errText string, ids ...string) {
	t.Helper()
	b, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "ops", Limit: len(ids), LeaseFor: time.Minute, IDs: ids})
	require.NoError(t, err)
	require.Len(t, b.Records, len(ids))
	outcomes := make([]backend.Outcome, len(ids))
	for i, r := range b.Records {
		outcomes[i] = backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomeDead, Error: errText}
	}
	settle(t, s, b.Token, outcomes...)
}

func listIDs(t *testing.T, q backend.Queue, f backend.ListFilter) []string {
	t.Helper()
	recs, err := q.List(context.Background(), f)
	require.NoError(t, err)
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

func testListFiltersAndPages(t *testing.T, h Harness) {
	q := queueOf(t, h)
	enqueue(t, h, outbox.EnqueueOptions{},
		outbox.Message{ID: "a1", Type: "T", Key: "k"}, outbox.Message{ID: "a2", Type: "T ", Key: "k "},
		outbox.Message{ID: "a3", Type: "U", Key: "k"}, outbox.Message{ID: "a4", Type: "T", Key: "k"})
	killAll(t, h.Store, "group 10010 gone", "a3")
	b := claim(t, h.Store, 1, time.Minute) // a1
	require.Equal(t, "a1", b.Records[0].ID)
	settle(t, h.Store, b.Token, backend.Outcome{ID: "a1", Seq: b.Records[0].Seq, Kind: backend.OutcomeRetry, Error: "timeout"})

	all := backend.ListFilter{Limit: 10}
	require.Equal(t, []string{"a1", "a2", "a3", "a4"}, listIDs(t, q, all), "in Seq order")
	require.Equal(t, []string{"a1", "a4"}, listIDs(t, q, backend.ListFilter{Type: "T", Limit: 10}), `type "T" is not "T "`)
	require.Equal(t, []string{"a1", "a3", "a4"}, listIDs(t, q, backend.ListFilter{Key: "k", Limit: 10}), `key "k" is not "k "`)
	require.Equal(t, []string{"a3"}, listIDs(t, q, backend.ListFilter{Status: outbox.StatusDead, Limit: 10}))
	require.Equal(t, []string{"a3"}, listIDs(t, q, backend.ListFilter{ErrorContains: "10010", Limit: 10}))
	require.Equal(t, []string{"a1", "a3"}, listIDs(t, q, backend.ListFilter{MinAttempts: 1, Limit: 10}))
	require.Equal(t, []string{"a1"}, listIDs(t, q, backend.ListFilter{Status: outbox.StatusPending, MinAttempts: 1, Limit: 10}), "failing, to be retried")
	require.Empty(t, listIDs(t, q, backend.ListFilter{OlderThan: time.Hour, Limit: 10}), "ages on the store's clock")

	// Pages by Seq.
	first, err := q.List(context.Background(), backend.ListFilter{Limit: 2})
	require.NoError(t, err)
	require.Len(t, first, 2)
	require.Equal(t, []string{"a3", "a4"}, listIDs(t, q, backend.ListFilter{AfterSeq: first[1].Seq, Limit: 2}))
}

func testListRefusesBadFilters(t *testing.T, h Harness) {
	q := queueOf(t, h)
	for _, f := range []backend.ListFilter{
		{Limit: 0}, {Limit: backend.MaxClaimLimit + 1}, {Limit: 1, OlderThan: -time.Second},
		{Limit: 1, MinAttempts: -1}, {Limit: 1, AfterSeq: -1}, {Limit: 1, Status: "lost"},
	} {
		_, err := q.List(context.Background(), f)
		require.Error(t, err, "%+v", f)
	}
}

func testRequeueOne(t *testing.T, h Harness) {
	q := queueOf(t, h)
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{}, outbox.Message{ID: "dead-1", Type: "T"}, outbox.Message{ID: "live-1", Type: "T"})
	killAll(t, h.Store, "group gone", "dead-1")

	require.NoError(t, q.Requeue(ctx, "dead-1"))
	r := get(t, h.Store, "dead-1")
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts, "a fresh schedule")
	require.Equal(t, "group gone", r.LastError, "the last error stays until the next attempt")
	b := claim(t, h.Store, 10, time.Minute)
	require.ElementsMatch(t, []string{"dead-1", "live-1"}, ids(b.Records), "due at once")

	require.ErrorIs(t, q.Requeue(ctx, "live-1"), backend.ErrNotDead, "only dead letters")
	require.ErrorIs(t, q.Requeue(ctx, "nope"), backend.ErrNotFound)
	require.ErrorIs(t, q.Requeue(ctx, "dead-1 "), backend.ErrNotFound, "an ID names one record exactly")
}

func testRequeueDeadByFilter(t *testing.T, h Harness) {
	q := queueOf(t, h)
	ctx := context.Background()
	var ms []outbox.Message
	var ids []string
	for i := range 12 {
		typ := "A"
		if i%3 == 0 {
			typ = "B"
		}
		id := fmt.Sprintf("d-%02d", i)
		ms = append(ms, outbox.Message{ID: id, Type: typ, Key: fmt.Sprintf("k-%d", i)})
		ids = append(ids, id)
	}
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	killAll(t, h.Store, "boom", ids[:6]...)
	killAll(t, h.Store, "bang", ids[6:]...)

	count := func(f backend.DeadFilter) int {
		n, err := q.CountDead(ctx, f)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 12, count(backend.DeadFilter{}))
	require.Equal(t, 8, count(backend.DeadFilter{Type: "A"}))
	require.Zero(t, count(backend.DeadFilter{Type: "A "}), "exact")
	require.Equal(t, 6, count(backend.DeadFilter{ErrorContains: "boom"}))
	require.Equal(t, 1, count(backend.DeadFilter{Key: "k-3"}))
	require.Zero(t, count(backend.DeadFilter{OlderThan: time.Hour}))

	n, err := q.RequeueDead(ctx, backend.DeadFilter{Type: "A"}, backend.RequeueOptions{BatchSize: 3, Limit: 5})
	require.NoError(t, err)
	require.Equal(t, 5, n, "Limit bounds the total")
	require.Equal(t, 3, count(backend.DeadFilter{Type: "A"}))
	n, err = q.RequeueDead(ctx, backend.DeadFilter{Type: "A"}, backend.RequeueOptions{BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, 3, n, "every match, in steps of 2")
	require.Equal(t, 4, count(backend.DeadFilter{}), "type B left alone")

	_, err = q.RequeueDead(ctx, backend.DeadFilter{}, backend.RequeueOptions{BatchSize: backend.MaxRequeueBatch + 1})
	require.Error(t, err)
	_, err = q.RequeueDead(ctx, backend.DeadFilter{}, backend.RequeueOptions{Limit: -1})
	require.Error(t, err)
	require.Equal(t, 4, count(backend.DeadFilter{}), "a refused call changes nothing")
}

// testRequeueWaitsForKeyInFlight: a dead letter requeued while a later
// record of its key is in flight is due at once for claims without
// ordering; ordered claims take it as soon as the record in flight is
// settled (never two records of a key in flight), not when its lease would
// have ended.
func testRequeueWaitsForKeyInFlight(t *testing.T, h Harness) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			q := queueOf(t, h)
			ctx := context.Background()
			k1, k2 := fmt.Sprintf("k1-%v", ordered), fmt.Sprintf("k2-%v", ordered)
			key := "K-" + k1
			enqueue(t, h, outbox.EnqueueOptions{}, outbox.Message{ID: k1, Key: key, Type: "T"}, outbox.Message{ID: k2, Key: key, Type: "T"})
			claimKey := func(ordered bool) backend.Batch {
				t.Helper()
				b, err := h.Store.Claim(ctx, backend.ClaimParams{Owner: "ops", Limit: 10, LeaseFor: time.Hour, Ordered: ordered})
				require.NoError(t, err)
				return b
			}
			b := claimKey(true)
			inFlight, k2Seq := b, int64(0)
			if keyPrefixes(t, b, map[string][]string{key: {k1, k2}}, nil, true)[key] == 2 {
				// The claim took k2 too: it stays in flight.
				settle(t, h.Store, b.Token, backend.Outcome{ID: k1, Seq: b.Records[0].Seq, Kind: backend.OutcomeDead, Error: "x"})
				k2Seq = b.Records[1].Seq
			} else {
				settle(t, h.Store, b.Token, backend.Outcome{ID: k1, Seq: b.Records[0].Seq, Kind: backend.OutcomeDead, Error: "x"})
				inFlight = claimKey(true)
				require.Equal(t, []string{k2}, ids(inFlight.Records))
				k2Seq = inFlight.Records[0].Seq
			}

			require.NoError(t, q.Requeue(ctx, k1))
			if !ordered {
				require.Equal(t, []string{k1}, ids(claimKey(false).Records), "without ordering: due at once")
				return
			}
			require.Zero(t, claimKey(true).Len(), "k2 is in flight: k1 must wait")
			settle(t, h.Store, inFlight.Token, backend.Outcome{ID: k2, Seq: k2Seq, Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: "later"})
			require.Equal(t, []string{k1}, ids(claimKey(true).Records), "k2 settled: k1 is claimed at once, not an hour later")
		})
	}
}

func testOutboxAndConsumers(t *testing.T, h Harness) {
	o, ok := h.Store.(backend.Outbox)
	if !ok {
		return // a consumer's Queue: the Outbox is its table's store
	}
	ctx := context.Background()
	require.NotEmpty(t, o.Name())
	before, err := o.LastSeq(ctx)
	require.NoError(t, err)
	enqueue(t, h, outbox.EnqueueOptions{}, outbox.Message{ID: "s-1", Type: "T"}, outbox.Message{ID: "s-2", Type: "T"})
	after, err := o.LastSeq(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, after-before, int64(2))
	self, err := o.ConsumerQueue("")
	require.NoError(t, err)
	require.Equal(t, get(t, o, "s-1"), get(t, self, "s-1"), `"" is the default consumer`)

	err = o.AddConsumer(ctx, "audit", backend.StartBeginning)
	if errors.Is(err, backend.ErrNoConsumers) {
		_, err := o.ConsumerQueue("audit")
		require.ErrorIs(t, err, backend.ErrNoConsumers)
		cs, err := o.Consumers(ctx)
		require.NoError(t, err)
		require.Empty(t, cs)
		return
	}
	require.NoError(t, err)
	require.ErrorIs(t, o.AddConsumer(ctx, "audit", backend.StartNow), backend.ErrConsumerExists)
	cs, err := o.Consumers(ctx)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, "audit", cs[0].Name)
	audit, err := o.ConsumerQueue("audit")
	require.NoError(t, err)
	b, err := audit.Claim(ctx, backend.ClaimParams{Owner: "ops", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"s-1", "s-2"}, ids(b.Records), "from the beginning")
	var outcomes []backend.Outcome
	for _, r := range b.Records {
		kind := backend.OutcomePublished
		if r.ID == "s-1" {
			kind = backend.OutcomeDead
		}
		outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: kind, Error: "audit says no"})
	}
	settle(t, audit, b.Token, outcomes...)
	dead, err := audit.CountDead(ctx, backend.DeadFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, dead, "the consumer's own dead letters")
	own, err := o.CountDead(ctx, backend.DeadFilter{})
	require.NoError(t, err)
	require.Zero(t, own, "the default consumer's are its own")

	_, err = o.RemoveConsumer(ctx, "audit")
	require.NoError(t, err)
	_, err = o.RemoveConsumer(ctx, "audit")
	require.ErrorIs(t, err, backend.ErrUnknownConsumer)
}
