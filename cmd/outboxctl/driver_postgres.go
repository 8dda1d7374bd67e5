package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	inboxpg "github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/internal/pgdsn"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// The PostgreSQL driver: store/postgres and inbox/postgres, through
// pgx's database/sql driver.
func init() {
	drivers["postgres"] = &driver{
		name:     "postgres",
		dsnForm:  pgDSNForm,
		agedFrom: "written",
		connect:  connectPostgres,
		openStore: func(db *sql.DB, table string) (outboxStore, error) {
			return postgres.New(db, postgres.Options{Table: table})
		},
		listTables: func(ctx context.Context, db *sql.DB) (tableList, error) {
			return queryTables(ctx, db, `SELECT table_name, count(*) FILTER (WHERE column_name IN ('event_id', 'xid', 'payload'))
				FROM information_schema.columns WHERE table_schema = current_schema() GROUP BY table_name ORDER BY table_name`)
		},
		schema: schemaDDL{version: postgres.SchemaVersion, sql: postgres.SchemaSQL},
		inbox:  inboxDDL{defaultTable: inboxpg.DefaultTable, version: inboxpg.SchemaVersion, sql: inboxpg.SchemaSQL},
		status: func(ctx context.Context, s outboxStore) (schemaStatus, error) {
			st, err := s.(*postgres.Store).SchemaStatus(ctx)
			return schemaStatus{version: st.Version, pending: st.Pending}, err
		},
	}
}

// pgDSNForm is how a PostgreSQL DSN looks.
const pgDSNForm = "postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable (percent-encode the password), " +
	"or host=HOST user=USER password='PASSWORD' dbname=DATABASE"

// connectPostgres parses a libpq URL or keyword/value DSN, refusing one
// that does not parse unambiguously (pgdsn.Check): pgx would read it
// otherwise than meant, and what it then reports (the host or database
// it took a part of the password for) holds the password. Its errors
// name nothing of the DSN; pgx's own parse errors, which quote it with
// the password masked as well as pgx can tell it, are not shown.
func connectPostgres(dsn string) (dbConn, error) {
	if err := pgdsn.Check(dsn); err != nil {
		return dbConn{}, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return dbConn{}, fmt.Errorf("does not parse: %s", pgDSNForm)
	}
	target := pgTarget(cfg)
	cn := dbConn{target: target, dbName: cfg.Database, hide: func(err error) error {
		return secretfmt.Hide(err, cfg.Password, []string{cfg.User, cfg.Host, cfg.Database, target})
	}}
	if cfg.Database == "" {
		return cn, errNoDatabase
	}
	cn.db = stdlib.OpenDB(*cfg)
	return cn, nil
}

// pgTarget names what cfg reaches: USER@HOST:PORT/DATABASE, from the
// fields pgx parsed, never from the DSN's text.
func pgTarget(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
