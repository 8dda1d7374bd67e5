package uitest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// A storeKind is a store the dashboard is tested on: operators see no
// difference between them.
type storeKind struct {
	name string
	// open returns a migrated outbox table on a fresh database, and the
	// database, to enqueue through.
	open func(t *testing.T, table string) (backend.Outbox, *sql.DB)
	// nulIDs says whether the store takes IDs with NUL in them
	// (PostgreSQL's text cannot hold one: store/postgres refuses them).
	nulIDs bool
	// screenshots says whether this kind's run writes docs/dashboard.md's
	// screenshots (one kind does, so that both runs do not write them).
	screenshots bool
}

var storeKinds = []storeKind{
	{name: "mysql", screenshots: true, nulIDs: true, open: func(t *testing.T, table string) (backend.Outbox, *sql.DB) {
		d := testutil.NewDatabase(t)
		s, err := mysql.New(d.DB, mysql.Options{Table: table})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(context.Background()))
		return s, d.DB
	}},
	{name: "postgres", open: func(t *testing.T, table string) (backend.Outbox, *sql.DB) {
		d := pgtest.NewDatabase(t)
		s, err := postgres.New(d.DB, postgres.Options{Table: table})
		require.NoError(t, err)
		require.NoError(t, s.Migrate(context.Background()))
		return s, d.DB
	}},
}

// forEachStore runs test once per store kind, as a subtest.
func forEachStore(t *testing.T, test func(t *testing.T, kind storeKind)) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) { test(t, kind) })
	}
}

// screenshot writes a screenshot if this kind writes them.
func (k storeKind) screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if k.screenshots {
		screenshot(t, ctx, name)
	}
}
