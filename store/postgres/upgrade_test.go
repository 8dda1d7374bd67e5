package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// TestUpgradeFromVersion1: tables made by schema version 1, holding a
// named consumer and messages handed over and not, migrate in place;
// Verify then passes, and the consumer's messages are all delivered, in
// order.
func TestUpgradeFromVersion1(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	v1, err := postgres.SchemaSQL(testTable, 0, 1)
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, v1)
	require.NoError(t, err)

	s, err := postgres.New(d.DB, postgres.Options{Table: testTable})
	require.NoError(t, err)
	require.ErrorContains(t, s.Verify(ctx), "schema version 1")
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Version)
	require.Len(t, st.Pending, postgres.SchemaVersion-1)

	require.NoError(t, s.AddConsumer(ctx, "audit", postgres.StartNow))
	audit, err := s.Consumer("audit")
	require.NoError(t, err)
	enqueueCommitted(t, d, s, outbox.Message{ID: "k-1", Key: "k", Type: "T"})
	b, err := audit.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	require.Equal(t, 1, b.Len(), "handed over and leased at version 1")
	enqueueCommitted(t, d, s, outbox.Message{ID: "k-2", Key: "k", Type: "T"})

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	_, err = audit.Settle(ctx, b.Token, []backend.Outcome{{ID: "k-1", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	require.Equal(t, []string{"k-2"}, drainOrdered(t, audit, "k", 1))
}
