package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
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
