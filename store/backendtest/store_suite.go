package backendtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// msg returns a test message with a key, a type and a payload.
func msg(id string) outbox.Message {
	return outbox.Message{ID: id, Key: "order-1", Type: "OrderPlaced", Payload: []byte(`{"id":"` + id + `"}`)}
}

// msgs returns n test messages with IDs prefix-0 … prefix-(n-1).
func msgs(prefix string, n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = msg(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// enqueue writes ms in one committed transaction.
func enqueue(t *testing.T, h Harness, opts outbox.EnqueueOptions, ms ...outbox.Message) {
	t.Helper()
	ctx := context.Background()
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	if err := h.Store.Enqueue(ctx, tx, &opts, ms...); err != nil {
		_ = tx.Rollback()
		t.Fatalf("enqueue: %v", err)
	}
	require.NoError(t, tx.Commit())
}

func claim(t *testing.T, s backend.Store, limit int, lease time.Duration) backend.Batch {
	t.Helper()
	b, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "test-node", Limit: limit, LeaseFor: lease})
	require.NoError(t, err)
	return b
}

// reclaim waits until a claim of s takes the one record whose lease the
// test let run out (what says so to a failure), and returns its batch.
func reclaim(t *testing.T, s backend.Store, what string) backend.Batch {
	t.Helper()
	var b backend.Batch
	outboxtest.Eventually(t, what, func() bool {
		b = claim(t, s, 10, time.Minute)
		return b.Len() == 1
	})
	return b
}

func ids(rs []outbox.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func get(t *testing.T, s backend.Store, id string) outbox.Record {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	require.NoError(t, err)
	return r
}

func settle(t *testing.T, s backend.Store, token string, outcomes ...backend.Outcome) backend.SettleResult {
	t.Helper()
	res, err := s.Settle(context.Background(), token, outcomes)
	require.NoError(t, err)
	return res
}

func testEnqueueCommit(t *testing.T, h Harness) {
	before := time.Now().Add(-time.Minute)
	m := outbox.Message{
		ID: "e-1", Key: "order-7", Type: "OrderPaid",
		Payload: []byte{0, 1, 2, 0xff, '"', '\\'},
		Headers: map[string]string{"request_id": "r-1", "traceparent": "00-abc-def-01"},
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	stamped := outbox.Message{ID: "e-2", Type: "CartCreated", CreatedAt: created}
	enqueue(t, h, outbox.EnqueueOptions{}, m, stamped)

	r := get(t, h.Store, "e-1")
	require.Equal(t, m.ID, r.ID)
	require.Equal(t, m.Key, r.Key)
	require.Equal(t, m.Type, r.Type)
	require.Equal(t, m.Payload, r.Payload)
	require.Equal(t, m.Headers, r.Headers)
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts)
	require.Empty(t, r.LastError)
	require.True(t, r.CreatedAt.After(before), "CreatedAt %v is set by the store", r.CreatedAt)
	require.True(t, r.PublishedAt.IsZero())

	r2 := get(t, h.Store, "e-2")
	require.True(t, created.Equal(r2.CreatedAt), "CreatedAt %v kept as given (%v)", r2.CreatedAt, created)
	require.Empty(t, r2.Key)
	require.Empty(t, r2.Headers)
	require.NotNil(t, r2.Payload)
	require.Empty(t, r2.Payload)
}

func testEnqueueRollback(t *testing.T, h Harness) {
	ctx := context.Background()
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Store.Enqueue(ctx, tx, nil, msg("rolled-back")))
	require.NoError(t, tx.Rollback())

	_, err = h.Store.Get(ctx, "rolled-back")
	require.ErrorIs(t, err, outbox.ErrNotFound)
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len())
}

func testUncommittedNotClaimable(t *testing.T, h Harness) {
	ctx := context.Background()
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	require.NoError(t, h.Store.Enqueue(ctx, tx, nil, msg("open")))

	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "a record of an open transaction must not be claimed")
	require.NoError(t, tx.Commit())
	require.Equal(t, []string{"open"}, ids(claim(t, h.Store, 10, time.Minute).Records))
}

func testDuplicateID(t *testing.T, h Harness) {
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{}, msg("dup"))

	// Already stored: the call fails and writes nothing, the first stays.
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	err = h.Store.Enqueue(ctx, tx, nil, msg("fresh"), msg("dup"))
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.Contains(t, err.Error(), "dup")
	require.NoError(t, tx.Commit())
	_, err = h.Store.Get(ctx, "fresh")
	require.ErrorIs(t, err, outbox.ErrNotFound, "nothing of a rejected call is written")
	require.Equal(t, outbox.StatusPending, get(t, h.Store, "dup").Status)

	// Twice in one call.
	tx, err = h.Begin(ctx)
	require.NoError(t, err)
	err = h.Store.Enqueue(ctx, tx, nil, msg("twice"), msg("twice"))
	require.ErrorIs(t, err, outbox.ErrDuplicateID)
	require.NoError(t, tx.Commit())
	_, err = h.Store.Get(ctx, "twice")
	require.ErrorIs(t, err, outbox.ErrNotFound)
}

func testInvalidMessage(t *testing.T, h Harness) {
	ctx := context.Background()
	cases := []struct {
		name string
		bad  outbox.Message
		want string
	}{
		{"empty ID", outbox.Message{Type: "T"}, "ID is empty"},
		{"empty type", outbox.Message{ID: "x"}, "Type is empty"},
		{"long ID", outbox.Message{ID: strings.Repeat("i", outbox.MaxIDLength+1), Type: "T"}, "ID is longer"},
		{"long key", outbox.Message{ID: "x", Type: "T", Key: strings.Repeat("k", outbox.MaxKeyLength+1)}, "Key is longer"},
		{"bad UTF-8", outbox.Message{ID: "x\xff", Type: "T"}, "not valid UTF-8"},
	}
	for _, c := range cases {
		tx, err := h.Begin(ctx)
		require.NoError(t, err)
		err = h.Store.Enqueue(ctx, tx, nil, msg("good-"+c.name), c.bad)
		require.ErrorIs(t, err, outbox.ErrInvalidMessage, c.name)
		require.Contains(t, err.Error(), c.want, c.name)
		require.NoError(t, tx.Commit())
		_, err = h.Store.Get(ctx, "good-"+c.name)
		require.ErrorIs(t, err, outbox.ErrNotFound, "%s: the valid message of a rejected call is not written", c.name)
	}
	require.ErrorContains(t, h.Store.Enqueue(ctx, nil, &outbox.EnqueueOptions{}, msg("x")), "nil")
	tx, err := h.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	require.ErrorContains(t, h.Store.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: -time.Second}, msg("x")), "HeadStart")
}

func testGetNotFound(t *testing.T, h Harness) {
	_, err := h.Store.Get(context.Background(), "nope")
	require.ErrorIs(t, err, outbox.ErrNotFound)
}

func testClaimLimit(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("m", 10)...)
	seen := map[string]bool{}
	for _, want := range []int{3, 3, 3, 1, 0} {
		b := claim(t, h.Store, 3, time.Minute)
		require.Len(t, b.Records, want)
		for _, r := range b.Records {
			require.False(t, seen[r.ID], "%s claimed twice while leased", r.ID)
			seen[r.ID] = true
		}
	}
	require.Len(t, seen, 10)
}

func testClaimOrder(t *testing.T, h Harness) {
	first := msgs("a", 5)
	enqueue(t, h, outbox.EnqueueOptions{}, first...)
	second := msgs("b", 5)
	enqueue(t, h, outbox.EnqueueOptions{}, second...)
	b := claim(t, h.Store, 10, time.Minute)
	want := append(ids(recordsOf(first)), ids(recordsOf(second))...)
	require.Equal(t, want, ids(b.Records))
}

func recordsOf(ms []outbox.Message) []outbox.Record {
	rs := make([]outbox.Record, len(ms))
	for i, m := range ms {
		rs[i] = outbox.Record{Message: m}
	}
	return rs
}

func testLeaseHides(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	b := claim(t, h.Store, 10, time.Minute)
	require.Len(t, b.Records, 1)
	require.NotEmpty(t, b.Token)
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "a leased record is not claimed again")
	other := h.OpenStore(t)
	require.Zero(t, claim(t, other, 10, time.Minute).Len(), "nor by another pool")
	r := get(t, h.Store, "x")
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts, "a claim is not an attempt")
}

func testLeaseExpiry(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	first := claim(t, h.Store, 10, 300*time.Millisecond)
	require.Len(t, first.Records, 1)
	second := reclaim(t, h.Store, "the expired lease lets the record be claimed again")
	require.Equal(t, "x", second.Records[0].ID)
	require.NotEqual(t, first.Token, second.Token)
}

func testSettleFenced(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	stale := claim(t, h.Store, 10, 200*time.Millisecond)
	require.Len(t, stale.Records, 1)
	current := reclaim(t, h.Store, "the lease expires and another worker claims the record")

	// The worker whose lease expired cannot overwrite the new owner's
	// state, whatever outcome it reports.
	for _, o := range []backend.Outcome{
		{ID: "x", Kind: backend.OutcomePublished},
		{ID: "x", Kind: backend.OutcomeRetry, Error: "late", RetryIn: time.Hour},
		{ID: "x", Kind: backend.OutcomeDead, Error: "late"},
		{ID: "x", Kind: backend.OutcomeRelease},
	} {
		res := settle(t, h.Store, stale.Token, o)
		require.Equal(t, backend.SettleResult{Applied: 0, Stale: 1}, res, o.Kind.String())
	}
	r := get(t, h.Store, "x")
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts)
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "the current lease still holds")

	res := settle(t, h.Store, current.Token, backend.Outcome{ID: "x", Kind: backend.OutcomeRetry, Error: "boom", RetryIn: time.Hour})
	require.Equal(t, backend.SettleResult{Applied: 1}, res)
	r = get(t, h.Store, "x")
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, "boom", r.LastError)
	require.Equal(t, backend.SettleResult{Stale: 1}, settle(t, h.Store, "no-such-token", backend.Outcome{ID: "x", Kind: backend.OutcomePublished}))
}

func testSettlePublished(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("a"), msg("b"))
	b := claim(t, h.Store, 10, time.Minute)
	require.Len(t, b.Records, 2)
	// A failed attempt first, so that publishing has a last error to clear.
	settle(t, h.Store, b.Token, backend.Outcome{ID: "a", Kind: backend.OutcomeRetry, Error: "first try failed"})
	b = claim(t, h.Store, 10, time.Minute)
	require.Equal(t, []string{"a"}, ids(b.Records))
	res := settle(t, h.Store, b.Token, backend.Outcome{ID: "a", Kind: backend.OutcomePublished})
	require.Equal(t, 1, res.Applied)

	r := get(t, h.Store, "a")
	require.Equal(t, outbox.StatusPublished, r.Status)
	require.Empty(t, r.LastError, "publishing clears last_error")
	require.Equal(t, 1, r.Attempts, "publishing keeps the attempt count")
	require.False(t, r.PublishedAt.IsZero())
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "b is still leased, a is published")
}

func testSettleRetry(t *testing.T, h Harness) {
	// x's retry is an hour away: that it is not due does not depend on
	// how fast the test runs. soon's comes in a moment.
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	b := claim(t, h.Store, 10, time.Minute)
	settle(t, h.Store, b.Token, backend.Outcome{ID: "x", Kind: backend.OutcomeRetry, Error: "im down", RetryIn: time.Hour})

	r := get(t, h.Store, "x")
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, "im down", r.LastError)
	require.True(t, r.NextAttemptAt.After(r.CreatedAt.Add(59*time.Minute)), "next attempt %v, created %v", r.NextAttemptAt, r.CreatedAt)
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "not due before RetryIn has passed")

	enqueue(t, h, outbox.EnqueueOptions{}, msg("soon"))
	b = claim(t, h.Store, 10, time.Minute)
	require.Equal(t, []string{"soon"}, ids(b.Records))
	settle(t, h.Store, b.Token, backend.Outcome{ID: "soon", Kind: backend.OutcomeRetry, Error: "im down", RetryIn: 300 * time.Millisecond})
	outboxtest.Eventually(t, "the record is due again", func() bool {
		b = claim(t, h.Store, 10, time.Minute)
		return b.Len() == 1
	})
	require.Equal(t, "soon", b.Records[0].ID, "x is still an hour away")
	require.Equal(t, 1, b.Records[0].Attempts)

	// Retries with different errors in one settle are each recorded.
	enqueue(t, h, outbox.EnqueueOptions{}, msg("y"), msg("z"))
	b2 := claim(t, h.Store, 10, time.Minute)
	require.Len(t, b2.Records, 2)
	settle(t, h.Store, b2.Token,
		backend.Outcome{ID: "y", Kind: backend.OutcomeRetry, Error: "err y", RetryIn: time.Hour},
		backend.Outcome{ID: "z", Kind: backend.OutcomeRetry, Error: "err z", RetryIn: time.Hour})
	require.Equal(t, "err y", get(t, h.Store, "y").LastError)
	require.Equal(t, "err z", get(t, h.Store, "z").LastError)
}

func testSettleDead(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	b := claim(t, h.Store, 10, time.Minute)
	res := settle(t, h.Store, b.Token, backend.Outcome{ID: "x", Kind: backend.OutcomeDead, Error: "group gone"})
	require.Equal(t, 1, res.Applied)
	r := get(t, h.Store, "x")
	require.Equal(t, outbox.StatusDead, r.Status)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, "group gone", r.LastError)
	require.Zero(t, claim(t, h.Store, 10, time.Millisecond).Len(), "dead records are never claimed")
}

func testSettleRelease(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, msg("x"))
	b, err := h.Store.Claim(context.Background(), backend.ClaimParams{Owner: "n", Limit: 1, LeaseFor: time.Hour, IDs: []string{"x"}})
	require.NoError(t, err)
	require.Len(t, b.Records, 1)
	settle(t, h.Store, b.Token, backend.Outcome{ID: "x", Kind: backend.OutcomeRelease})
	r := get(t, h.Store, "x")
	require.Zero(t, r.Attempts, "a release is not an attempt")
	require.Empty(t, r.LastError)
	require.Equal(t, []string{"x"}, ids(claim(t, h.Store, 10, time.Minute).Records), "a released record is due at once")
}

func testSettleTruncates(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	b := claim(t, h.Store, 10, time.Minute)
	long := strings.Repeat("é", backend.MaxLastErrorBytes) // 2 bytes each
	settle(t, h.Store, b.Token, backend.Outcome{ID: "x", Kind: backend.OutcomeRetry, Error: long, RetryIn: time.Hour})
	r := get(t, h.Store, "x")
	require.LessOrEqual(t, len(r.LastError), backend.MaxLastErrorBytes)
	require.True(t, strings.HasPrefix(r.LastError, "éé"))
	require.True(t, strings.HasSuffix(r.LastError, "…"))
}

func testSettleIdempotent(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("x"))
	b := claim(t, h.Store, 10, time.Minute)
	o := backend.Outcome{ID: "x", Kind: backend.OutcomeRetry, Error: "e", RetryIn: time.Hour}
	require.Equal(t, backend.SettleResult{Applied: 1}, settle(t, h.Store, b.Token, o))
	require.Equal(t, backend.SettleResult{Stale: 1}, settle(t, h.Store, b.Token, o), "a repeated settle changes nothing")
	require.Equal(t, 1, get(t, h.Store, "x").Attempts)
	_, err := h.Store.Settle(context.Background(), b.Token, []backend.Outcome{{ID: "x", Kind: backend.OutcomeKind(99)}})
	require.ErrorContains(t, err, "unknown kind")
}

func testHeadStart(t *testing.T, h Harness) {
	// later's head start is an hour: that it is not due does not depend
	// on how fast the test runs. soon's ends in a moment.
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, msg("later"))
	enqueue(t, h, outbox.EnqueueOptions{}, msg("now"))
	require.Equal(t, []string{"now"}, ids(claim(t, h.Store, 10, time.Minute).Records), "head-started records are not due yet")
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: 300 * time.Millisecond}, msg("soon"))
	outboxtest.Eventually(t, "the short head start passes", func() bool {
		b := claim(t, h.Store, 10, time.Minute)
		return b.Len() == 1 && b.Records[0].ID == "soon"
	})
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len())
}

func testClaimByIDs(t *testing.T, h Harness) {
	ctx := context.Background()
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, msg("a"), msg("b"), msg("c"), msg("d"))
	// d is published, c is leased by a worker.
	b, err := h.Store.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Hour, IDs: []string{"d"}})
	require.NoError(t, err)
	settle(t, h.Store, b.Token, backend.Outcome{ID: "d", Kind: backend.OutcomePublished})
	_, err = h.Store.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Hour, IDs: []string{"c"}})
	require.NoError(t, err)

	got, err := h.Store.Claim(ctx, backend.ClaimParams{Owner: "writer", Limit: 5, LeaseFor: time.Hour, IDs: []string{"b", "a", "c", "d", "unknown"}})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids(got.Records), "only pending, unleased records, in insert order, whatever their due time")
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "nothing else is due")
}

// testConcurrentClaims: claims running at once never take a record
// twice, and between them take every record. Each claimer goes on until
// every record is claimed, not until its first empty claim: a claim may
// come back empty while another claimer's transaction holds the records
// for a moment (store/mysql's named consumers: the hand-over before a
// claim locks the consumption rows it writes again), and stopping there
// made the test depend on which goroutine ran when.
func testConcurrentClaims(t *testing.T, h Harness) {
	const n = 300
	enqueue(t, h, outbox.EnqueueOptions{}, msgs("c", n)...)
	stores := []backend.Store{h.Store, h.OpenStore(t), h.OpenStore(t)}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		total   int
		wg      sync.WaitGroup
		errs    = make(chan error, len(stores))
	)
	deadline := time.Now().Add(outboxtest.WaitTimeout)
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := total >= n
				mu.Unlock()
				if done || time.Now().After(deadline) {
					return
				}
				b, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "w", Limit: 7, LeaseFor: time.Hour})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range b.Records {
					claimed[r.ID]++
				}
				total += b.Len()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, claimed, n)
	for id, c := range claimed {
		require.Equal(t, 1, c, "%s claimed by two concurrent claims", id)
	}
	require.Zero(t, claim(t, h.Store, 10, time.Minute).Len(), "every record is leased")
}

func testClaimValidation(t *testing.T, h Harness) {
	ctx := context.Background()
	cases := []struct {
		p    backend.ClaimParams
		want string
	}{
		{backend.ClaimParams{Limit: 1, LeaseFor: time.Second}, "Owner"},
		{backend.ClaimParams{Owner: "n", Limit: 0, LeaseFor: time.Second}, "Limit 0"},
		{backend.ClaimParams{Owner: "n", Limit: outbox.MaxBatchSize + 1, LeaseFor: time.Second}, "Limit"},
		{backend.ClaimParams{Owner: "n", Limit: 1}, "LeaseFor"},
		{backend.ClaimParams{Owner: "n", Limit: 1, LeaseFor: time.Second, IDs: []string{"a", "b"}}, "Limit"},
	}
	for _, c := range cases {
		_, err := h.Store.Claim(ctx, c.p)
		require.ErrorContains(t, err, c.want, "%+v", c.p)
	}
}
