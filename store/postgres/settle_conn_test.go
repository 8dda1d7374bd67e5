package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestSettleSurvivesALostConnection: the server ends every connection
// between a claim and its settle (a failover, a pooler's restart, a
// DBA's pg_terminate_backend). The settle, fenced by its token, is tried
// again on a new connection and records every outcome, instead of
// leaving the batch to be delivered again after its lease (the chaos
// suite counted thousands of such duplicates before).
func TestSettleSurvivesALostConnection(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.Open(t))
	ctx := context.Background()
	var msgs []outbox.Message
	for i := range 5 {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("m-%d", i), Type: "T"})
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msgs...))
	for round := range 3 {
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 2, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.NotEmpty(t, b.Records, "round %d", round)
		killed, err := d.KillConnections(ctx)
		require.NoError(t, err)
		require.Positive(t, killed, "the store's pooled connection was there to kill")
		var outcomes []backend.Outcome
		for _, r := range b.Records {
			outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		res, err := s.Settle(ctx, b.Token, outcomes)
		require.NoError(t, err, "round %d", round)
		require.Equal(t, len(outcomes), res.Applied, "round %d", round)
		for _, r := range b.Records {
			got, err := s.Get(ctx, r.ID)
			require.NoError(t, err)
			require.Equal(t, outbox.StatusPublished, got.Status)
		}
	}
}
