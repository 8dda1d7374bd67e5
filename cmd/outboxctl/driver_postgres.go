package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	inboxpg "github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// The PostgreSQL driver: store/postgres and inbox/postgres, through
// pgx's database/sql driver.
func init() {
	drivers["postgres"] = &driver{
		name:    "postgres",
		dsnForm: pgDSNForm,
		connect: connectPostgres,
		openStore: func(db *sql.DB, table string) (outboxStore, error) {
			return postgres.New(db, postgres.Options{Table: table})
		},
		listTables: func(ctx context.Context, db *sql.DB) (tableList, error) {
			return queryTables(ctx, db, `SELECT table_name, count(*) FILTER (WHERE column_name IN ('event_id', 'status', 'payload'))
				FROM information_schema.columns WHERE table_schema = current_schema() GROUP BY table_name ORDER BY table_name`)
		},
		schema: schemaDDL{version: postgres.SchemaVersion, sql: postgres.SchemaSQL},
		inbox:  inboxDDL{defaultTable: inboxpg.DefaultTable, version: inboxpg.SchemaVersion, sql: inboxpg.SchemaSQL},
		status: func(ctx context.Context, s outboxStore) (schemaStatus, error) {
			st, err := s.(*postgres.Store).SchemaStatus(ctx)
			return schemaStatus{version: st.Version, pending: st.Pending}, err
		},
		migrate: func(ctx context.Context, s outboxStore) error { return s.(*postgres.Store).Migrate(ctx) },
	}
}

// pgDSNForm is how a PostgreSQL DSN looks.
const pgDSNForm = "postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable, or host=HOST user=USER dbname=DATABASE"

// connectPostgres parses a libpq URL or keyword/value DSN. pgx's parse
// errors name the DSN's parts, with the password masked; the message
// here names none of them.
func connectPostgres(dsn string) (dbConn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return dbConn{}, fmt.Errorf("does not parse: %s", pgDSNForm)
	}
	cn := dbConn{target: pgTarget(cfg), dbName: cfg.Database, password: cfg.Password}
	if cfg.Database == "" {
		return cn, errNoDatabase
	}
	cn.db = stdlib.OpenDB(*cfg)
	return cn, nil
}

// pgTarget names what cfg reaches: USER@HOST:PORT/DATABASE.
func pgTarget(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
