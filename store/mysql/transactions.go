package mysql

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

// ExecerOf says that the store writes through no transaction but an
// Execer (a *sql.Tx): MySQL's transactions are database/sql's.
func (s *Store) ExecerOf(any) (backend.Execer, bool) { return nil, false }
