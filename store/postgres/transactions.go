package postgres

import (
	"context"
	"database/sql"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// BeginTx begins a transaction on the store's database, with the
// defaults of database/sql: what outbox.Writer's Do runs a command in
// (backend.Transactor).
func (s *Store) BeginTx(ctx context.Context) (*sql.Tx, error) {
	return s.db.BeginTx(ctx, nil)
}

// ExecerOf takes a transaction of pgx's own API (pgx.Tx) for
// outbox.Writer, as PgxTx does: a Writer's Commit and Enqueue take the
// pgx.Tx itself.
func (s *Store) ExecerOf(tx any) (backend.Execer, bool) {
	if q, ok := tx.(PgxQuerier); ok {
		return PgxTx(q), true
	}
	return nil, false
}
