package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxrelay/outboxrelay/internal/pgdsn"
)

// defaultDBName is the database the bench creates and drops.
const defaultDBName = "outboxrelay_pgbench"

// bench holds the database the scenarios share.
type bench struct {
	admin   *pgx.Conn // on the server's own database: creates and drops dbName
	ctl     *pgx.Conn // on dbName: fills tables, reads counters
	dbName  string
	dsn     string // of dbName
	version string
	arms    []arm
	// serverPID is the postmaster's process ID, 0 when unknown
	// (-server-pid): with it, the server's CPU time is measured.
	serverPID int
	// onDrain, when set, is told of every drain: the deliveries due (the
	// events enqueued, times their consumers), the deliveries its
	// consumers saw and the events left undelivered.
	onDrain func(arm string, c compareConfig, due, delivered, left int)
}

func open(ctx context.Context, serverDSN, dbName string) (*bench, error) {
	// pgdsn.Check's errors, unlike url.Parse's and pgx's, quote nothing
	// of the DSN; one that passes reads the same to both.
	if err := pgdsn.Check(serverDSN); err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	u, err := url.Parse(serverDSN)
	if err != nil || !pgdsn.IsURL(serverDSN) {
		return nil, errors.New("-dsn: not a postgres:// URL (not shown: it may hold a password); the bench sets the database in its path")
	}
	admin, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		return nil, err
	}
	b := &bench{admin: admin, arms: allArms(), dbName: dbName}
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName + " WITH (FORCE)", "CREATE DATABASE " + dbName} {
		if _, err := admin.Exec(ctx, q); err != nil {
			admin.Close(ctx)
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	u.Path = "/" + dbName
	b.dsn = u.String()
	if b.ctl, err = pgx.Connect(ctx, b.dsn); err != nil {
		b.close()
		return nil, err
	}
	if err := b.ctl.QueryRow(ctx, "SHOW server_version").Scan(&b.version); err != nil {
		b.close()
		return nil, err
	}
	b.version = "PostgreSQL " + b.version
	return b, nil
}

// pool opens a pool of at most conns connections on the bench database:
// each worker of every arm has a pool of its own, as an instance would.
func (b *bench) pool(ctx context.Context, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(b.dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = conns
	return pgxpool.NewWithConfig(ctx, cfg)
}

func (b *bench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b.ctl != nil {
		_ = b.ctl.Close(ctx)
		b.ctl = nil
	}
	if b.admin != nil {
		_, _ = b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+b.dbName+" WITH (FORCE)")
		_ = b.admin.Close(ctx)
		b.admin = nil
	}
}

// exec runs statements on the control connection, in order.
func (b *bench) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := b.ctl.Exec(ctx, q); err != nil {
			return fmt.Errorf("%.70s: %w", q, err)
		}
	}
	return nil
}

// fillPayload is the SQL expression (bytea) of a payload of size bytes
// for row n: distinct per row, JSON-like, and not all one byte.
func fillPayload(size int) string {
	return fmt.Sprintf(`convert_to(rpad('{"gift":"rose","n":' || n || ',"pad":"' || encode(sha256(n::text::bytea), 'hex'), %d, encode(sha256((n + 1)::text::bytea), 'hex')), 'UTF8')`, size)
}

// goPayload is fillPayload in Go, for the arms that must insert through
// their own API (River).
func goPayload(n, size int) string {
	sha := func(n int) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(n)))) }
	p := []byte(`{"gift":"rose","n":` + strconv.Itoa(n) + `,"pad":"` + sha(n))
	for fill := sha(n + 1); len(p) < size; {
		p = append(p, fill[:min(len(fill), size-len(p))]...)
	}
	return string(p[:size])
}
