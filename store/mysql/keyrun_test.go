package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
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
