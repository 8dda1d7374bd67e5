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
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// TestStoreSurvivesALostConnection: the server ends every connection
// between a claim and its settle, and again before the next claim (a
// failover, a pooler's restart, a DBA's pg_terminate_backend). The
// settle, fenced by its token, is tried again on a new connection and
// records every outcome, instead of leaving the batch to be delivered
// again after its lease (the chaos suite counted thousands of such
// duplicates before); the claim is tried again too, instead of failing
// the worker's round. The same holds for a named consumer, whose claims
// and settles read the consumer registry first (that read failed at
// once: 733 failed claims and 208-811 duplicates in 3,000 messages with
// backends killed every 50-250 ms).
func TestStoreSurvivesALostConnection(t *testing.T) {
	for _, consumer := range []string{"", "audit"} {
		t.Run(map[string]string{"": "Default", "audit": "Named"}[consumer], func(t *testing.T) {
			d := pgtest.NewDatabase(t)
			s := newStore(t, d.Open(t))
			ctx := context.Background()
			var c backend.Store = s
			if consumer != "" {
				require.NoError(t, s.AddConsumer(ctx, consumer, postgres.StartNow))
				named, err := s.Consumer(consumer)
				require.NoError(t, err)
				c = named
			}
			var msgs []outbox.Message
			for i := range 6 {
				msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("m-%d", i), Key: fmt.Sprintf("k-%d", i%2), Type: "T"})
			}
			require.NoError(t, s.Enqueue(ctx, d.DB, nil, msgs...))
			for round := range 3 {
				kill(t, d)
				b, err := c.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 2, LeaseFor: time.Minute, Ordered: round%2 == 1})
				require.NoError(t, err, "round %d: claim", round)
				require.NotEmpty(t, b.Records, "round %d", round)
				kill(t, d)
				var outcomes []backend.Outcome
				for _, r := range b.Records {
					outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
				}
				res, err := c.Settle(ctx, b.Token, outcomes)
				require.NoError(t, err, "round %d: settle", round)
				require.Equal(t, len(outcomes), res.Applied, "round %d", round)
				for _, r := range b.Records {
					got, err := c.Get(ctx, r.ID)
					require.NoError(t, err)
					require.Equal(t, outbox.StatusPublished, got.Status)
				}
			}
		})
	}
}

// kill ends every connection to d's database but the caller's own.
func kill(t *testing.T, d *pgtest.Database) {
	t.Helper()
	killed, err := d.KillConnections(context.Background())
	require.NoError(t, err)
	require.Positive(t, killed, "the store's pooled connection was there to kill")
}
