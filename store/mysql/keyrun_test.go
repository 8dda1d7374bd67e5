package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// An ordered walk that meets messages of a key in flight in another
// batch gives them state rows (they wait behind it). Once that batch is
// settled, the key's waiting messages go out in one claim, in order:
// not one a claim, which with many keys in flight at once held a named
// consumer's delivery to a few messages a key a second (the soak's
// activity consumer fell 20 s behind at 200 events a second).
func TestADivertedKeyGoesOutWholeInOneClaim(t *testing.T) {
	t.Parallel()
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	ordered := backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true}
	msg := func(id, key string) outbox.Message { return outbox.Message{ID: id, Key: key, Type: "T"} }
	publish := func(b backend.Batch) []backend.Outcome {
		var os []backend.Outcome
		for _, r := range b.Records {
			os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		return os
	}

	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msg("k1", "K")))
	first, err := s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"k1"}, recordIDs(first.Records))

	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msg("k2", "K"), msg("k3", "K"), msg("x1", "X"), msg("k4", "K")))
	b, err := s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"x1"}, recordIDs(b.Records), "K's wait behind k1")
	_, err = s.Settle(ctx, b.Token, publish(b))
	require.NoError(t, err)

	_, err = s.Settle(ctx, first.Token, publish(first))
	require.NoError(t, err)
	b, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"k2", "k3", "k4"}, recordIDs(b.Records), "the key's waiting messages, in one claim, in order")

	// A failure holds the rest of the run back: k3 is retried later, k4
	// (released by the worker behind it) waits for it.
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{
		{ID: "k2", Kind: backend.OutcomePublished},
		{ID: "k3", Kind: backend.OutcomeRetry, Error: "down", RetryIn: time.Hour},
		{ID: "k4", Kind: backend.OutcomeRelease},
	})
	require.NoError(t, err)
	b, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Zero(t, b.Len(), "k4 waits for k3")
}

// A range taken over by a claim of a smaller batch is split: the claim
// takes its first part, the rest stays a range of its own for a later
// claim. When the first part's message of a key fails, the key's next
// message, in the rest, must wait for its retry: before, the rest's
// take-over handed it out at once (workers of different BatchSize, as
// in a rolling deploy that changes it, or a requeued dead letter older
// than a range that ran out).
func TestATakenOverRangeWaitsForItsKeysOlderMessages(t *testing.T) {
	t.Parallel()
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	msg := func(id, key string) outbox.Message { return outbox.Message{ID: id, Key: key, Type: "T"} }
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msg("k1", "K"), msg("x1", "X"), msg("y1", "Y"), msg("k2", "K")))

	short := 200 * time.Millisecond
	a, err := s.Claim(ctx, backend.ClaimParams{Owner: "a", Limit: 10, LeaseFor: short, Ordered: true})
	require.NoError(t, err)
	require.Equal(t, []string{"k1", "x1", "y1", "k2"}, recordIDs(a.Records))

	// a's lease runs out; b, of a smaller batch, takes the first two.
	var b backend.Batch
	outboxtest.Eventually(t, "a's lease ran out", func() bool {
		b, err = s.Claim(ctx, backend.ClaimParams{Owner: "b", Limit: 2, LeaseFor: short, Ordered: true})
		require.NoError(t, err)
		return b.Len() > 0
	})
	require.Equal(t, []string{"k1", "x1"}, recordIDs(b.Records))
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{
		{ID: "k1", Kind: backend.OutcomeRetry, Error: "down", RetryIn: time.Hour},
		{ID: "x1", Kind: backend.OutcomePublished},
	})
	require.NoError(t, err)

	// The rest (y1, k2) runs out too: k2 waits for k1's retry.
	ordered := backend.ClaimParams{Owner: "c", Limit: 10, LeaseFor: time.Minute, Ordered: true}
	var c backend.Batch
	outboxtest.Eventually(t, "the rest of the range ran out", func() bool {
		c, err = s.Claim(ctx, ordered)
		require.NoError(t, err)
		return c.Len() > 0
	})
	require.Equal(t, []string{"y1"}, recordIDs(c.Records), "k2 must wait for k1")
	_, err = s.Settle(ctx, c.Token, []backend.Outcome{{ID: "y1", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	c, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Zero(t, c.Len(), "k2 still waits for k1")

	// k1 comes back for its retry, then k2.
	_, err = d.DB.ExecContext(ctx, "UPDATE "+testTable+"_state SET next_attempt_at = UTC_TIMESTAMP(6) WHERE status = 'pending'")
	require.NoError(t, err)
	c, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"k1"}, recordIDs(c.Records))
	_, err = s.Settle(ctx, c.Token, []backend.Outcome{{ID: "k1", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	c, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"k2"}, recordIDs(c.Records))
}
