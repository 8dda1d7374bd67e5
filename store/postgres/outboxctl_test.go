package postgres_test

import (
	"context"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// outboxctlStore is what cmd/outboxctl needs of a store (its
// outboxStore): the Store must keep satisfying it, so that the tool can
// run on a PostgreSQL outbox.
type outboxctlStore interface {
	backend.Outbox
	backend.Purger
	Verify(ctx context.Context) error
	CountPurgeable(ctx context.Context, olderThan time.Duration) (int, error)
	PurgeAll(ctx context.Context, olderThan time.Duration, batch int, pause time.Duration) (int, error)
}

var (
	_ outboxctlStore = (*postgres.Store)(nil)
	_ backend.Queue  = (*postgres.ConsumerStore)(nil)

	// outboxctl schema prints SchemaSQL(table, from, to) for versions 1
	// to SchemaVersion.
	_ func(string, int, int) (string, error) = postgres.SchemaSQL
	_                                        = postgres.SchemaVersion
)
