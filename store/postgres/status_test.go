package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

func TestSchemaStatus(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.New(d.DB, postgres.Options{Table: "status_outbox"})
	require.NoError(t, err)

	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, st.Version, "no table yet")
	require.Len(t, st.Pending, postgres.SchemaVersion)
	create, err := postgres.SchemaSQL("status_outbox", 0, postgres.SchemaVersion)
	require.NoError(t, err)
	require.Equal(t, create, strings.Join(st.Pending, "\n"), "what Migrate would run is what SchemaSQL prints")

	require.NoError(t, s.Migrate(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, postgres.SchemaStatus{Version: postgres.SchemaVersion}, st)
}

// TestRequeueOfALiveRecordIsErrNotDead: the sentinel is exported, as
// store/mysql's is, so that callers need not import outbox/backend.
func TestRequeueOfALiveRecordIsErrNotDead(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s, err := postgres.New(d.DB, postgres.Options{Table: "live_outbox"})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "live", Type: "T"}))
	require.ErrorIs(t, s.Requeue(ctx, "live"), postgres.ErrNotDead)
	require.ErrorIs(t, s.Requeue(ctx, "gone"), outbox.ErrNotFound)
}
