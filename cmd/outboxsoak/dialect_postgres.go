package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// postgresDialect is PostgreSQL 13+, through pgx and store/postgres.
type postgresDialect struct {
	cfg     *pgx.ConnConfig
	secrets []string
}

// newPostgres parses a DSN that is not "" (newDialect).
func newPostgres(dsn string) (*postgresDialect, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil || ambiguousURL(dsn) {
		return nil, errors.New("the PostgreSQL DSN does not parse; its forms are postgres://user:password@host:5432/database?sslmode=disable (a password's reserved characters percent-encoded) and host=HOST user=USER password=PASSWORD dbname=DATABASE")
	}
	return &postgresDialect{cfg: cfg, secrets: secretsOf(dsn, cfg.Password)}, nil
}

func (d *postgresDialect) name() string        { return "postgres" }
func (d *postgresDialect) dsnDatabase() string { return d.cfg.Database }
func (d *postgresDialect) ph(i int) string     { return "$" + strconv.Itoa(i) }
func (d *postgresDialect) redact(err error) error {
	return redactErr(err, d.secrets)
}

func (d *postgresDialect) describe(database string) string {
	if database == "" {
		database = d.cfg.Database
	}
	return redactText(net.JoinHostPort(d.cfg.Host, strconv.Itoa(int(d.cfg.Port)))+"/"+database, d.secrets)
}

func (d *postgresDialect) serverAddr() (string, error) {
	if len(d.cfg.Host) > 0 && d.cfg.Host[0] == '/' {
		return "", errors.New("the DSN reaches the server over a Unix socket: a proxy needs tcp")
	}
	return net.JoinHostPort(d.cfg.Host, strconv.Itoa(int(d.cfg.Port))), nil
}

// config returns the connection configuration for database and addr
// (the DSN's when "").
func (d *postgresDialect) config(database, addr string) (*pgx.ConnConfig, error) {
	cfg := d.cfg.Copy()
	if database != "" {
		cfg.Database = database
	}
	if addr != "" {
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", addr, err)
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", addr, err)
		}
		cfg.Host, cfg.Port = host, uint16(port)
		for _, fb := range cfg.Fallbacks { // sslmode=prefer tries TLS, then not: both through addr
			fb.Host, fb.Port = host, uint16(port)
		}
	}
	return cfg, nil
}

func (d *postgresDialect) open(database, addr string) (*sql.DB, error) {
	cfg, err := d.config(database, addr)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg), nil
}

func (d *postgresDialect) createDatabase(ctx context.Context, db *sql.DB, name string) error {
	_, err := db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`)
	return d.redact(err)
}

func (d *postgresDialect) dropDatabase(ctx context.Context, db *sql.DB, name string) error {
	_, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	return d.redact(err)
}

func (d *postgresDialect) newStore(db *sql.DB, table string, notifyInterval time.Duration) (soakStore, error) {
	return postgres.New(db, postgres.Options{Table: table, NotifyInterval: notifyInterval})
}

// listen is a postgres.Listener on its own connection, as
// docs/postgres-store.md recommends beside every worker.
func (d *postgresDialect) listen(database, addr, table string, logger *slog.Logger) (func(context.Context, func()) error, error) {
	cfg, err := d.config(database, addr)
	if err != nil {
		return nil, err
	}
	l, err := postgres.NewListenerConfig(cfg, postgres.ListenerOptions{Table: table, Logger: logger})
	if err != nil {
		return nil, d.redact(err)
	}
	return l.Run, nil
}

func (d *postgresDialect) version(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&v)
	return "PostgreSQL " + v, d.redact(err)
}

// figures reads the sessions on database (pg_stat_activity) and the
// tables' sizes and tuple counts (pg_stat_user_tables: the statistics
// collector's, behind by up to its reporting interval).
func (d *postgresDialect) figures(ctx context.Context, db *sql.DB, database, prefix string) (serverFigures, error) {
	f := serverFigures{Tables: map[string]tableFigures{}, HistoryLength: -1}
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", database).Scan(&f.Connections)
	if err != nil {
		return f, d.redact(fmt.Errorf("count sessions: %w", err))
	}
	rows, err := db.QueryContext(ctx, `SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid),
			COALESCE(s.n_live_tup, 0), COALESCE(s.n_dead_tup, 0)
		FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace AND c.relname LIKE $1`, likePrefix(prefix))
	if err != nil {
		return f, d.redact(fmt.Errorf("table sizes: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var t tableFigures
		if err := rows.Scan(&name, &t.DataBytes, &t.IndexBytes, &t.LiveTuples, &t.DeadTuples); err != nil {
			return f, d.redact(fmt.Errorf("table sizes: %w", err))
		}
		f.Tables[name] = t
	}
	if err := rows.Err(); err != nil {
		return f, d.redact(fmt.Errorf("table sizes: %w", err))
	}
	return f, nil
}

// killSessions ends the sessions on database from one of ports with
// pg_terminate_backend.
func (d *postgresDialect) killSessions(ctx context.Context, db *sql.DB, database string, ports []int) (int, error) {
	if len(ports) == 0 {
		return 0, nil
	}
	list := make([]string, len(ports))
	for i, p := range ports {
		list[i] = strconv.Itoa(p)
	}
	var killed int
	err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND client_port = ANY(string_to_array($2, ',')::int[]) AND pid <> pg_backend_pid()`,
		database, strings.Join(list, ",")).Scan(&killed)
	return killed, d.redact(err)
}
