package main

import (
	"context"
	"database/sql"
	"errors"

	mysqldrv "github.com/go-sql-driver/mysql"

	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// The MySQL and MariaDB driver: store/mysql and inbox/mysql.
func init() {
	drivers["mysql"] = &driver{
		name:     "mysql",
		dsnForm:  dsnsafe.Form,
		agedFrom: "published",
		connect:  connectMySQL,
		openStore: func(db *sql.DB, table string) (outboxStore, error) {
			return mysql.New(db, mysql.Options{Table: table})
		},
		listTables: func(ctx context.Context, db *sql.DB) (tableList, error) {
			return queryTables(ctx, db, `SELECT TABLE_NAME, SUM(LOWER(COLUMN_NAME) IN ('event_id', 'payload', 'status', 'writer_until'))
				FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() GROUP BY TABLE_NAME ORDER BY TABLE_NAME`)
		},
		schema: schemaDDL{version: mysql.SchemaVersion, sql: mysql.SchemaSQL},
		inbox:  inboxDDL{defaultTable: inboxmysql.DefaultTable, version: inboxmysql.SchemaVersion, sql: inboxmysql.SchemaSQL},
		status: func(ctx context.Context, s outboxStore) (schemaStatus, error) {
			st, err := s.(*mysql.Store).SchemaStatus(ctx)
			return schemaStatus{version: st.Version, pending: st.Pending}, err
		},
	}
}

// connectMySQL parses a go-sql-driver DSN (USER:PASSWORD@tcp(HOST:PORT)/DB),
// refusing one that does not parse unambiguously (dsnsafe.Parse).
func connectMySQL(dsn string) (dbConn, error) {
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return dbConn{}, err
	}
	cn := dbConn{target: dsnsafe.Target(cfg), dbName: cfg.DBName, hide: func(err error) error { return dsnsafe.Hide(err, cfg) }}
	if cfg.DBName == "" {
		return cn, errNoDatabase
	}
	connector, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return cn, cn.hide(err)
	}
	cn.db = sql.OpenDB(connector)
	return cn, nil
}

// errNoDatabase: the DSN names no database.
var errNoDatabase = errors.New("names no database")
