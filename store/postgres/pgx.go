package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// PgxQuerier is what PgxTx takes: a pgx.Tx, or a *pgx.Conn or
// *pgxpool.Pool (each statement then commits by itself).
type PgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PgxTx adapts a transaction of pgx's own API (pgx.Tx, from
// pgx.Conn.Begin or pgxpool.Pool.Begin) to the backend.Execer that
// Store.Enqueue takes, for services that use pgx directly rather than
// database/sql:
//
//	tx, err := pool.Begin(ctx)
//	...
//	err = store.Enqueue(ctx, postgres.PgxTx(tx), nil, msgs...)
//	...
//	err = tx.Commit(ctx)
//
// The messages then commit or roll back with tx. The Store itself still
// reads and claims through its *sql.DB (stdlib.OpenDBFromPool(pool)
// gives one on the same pool).
func PgxTx(tx PgxQuerier) backend.Execer { return &pgxExecer{q: tx} }

type pgxExecer struct{ q PgxQuerier }

func (e *pgxExecer) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := e.q.Exec(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgxResult(tag.RowsAffected()), nil
}

// pgxResult is the sql.Result of a pgx command.
type pgxResult int64

func (r pgxResult) LastInsertId() (int64, error) {
	return 0, errors.New("postgres store: LastInsertId is not supported by PostgreSQL")
}

func (r pgxResult) RowsAffected() (int64, error) { return int64(r), nil }
