package svckit

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// Pool is a MySQL pool's limits, and how long opening it waits for the
// server. The services' configs fill every field (their defaults).
type Pool struct {
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	ConnMaxIdleTime time.Duration
	StartupTimeout  time.Duration
}

// OpenMySQL opens a pool on dsn with p's limits and waits (p.StartupTimeout,
// or ctx) until the server answers, as it may still be starting next to
// the service, retrying every second. Its errors name the DSN's user,
// address and database, never its password.
func OpenMySQL(ctx context.Context, dsn string, p Pool) (*sql.DB, error) {
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	target := dsnsafe.Target(cfg)
	connector, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql %s: %w", target, dsnsafe.Err(err, cfg.Passwd))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(p.MaxOpenConns)
	db.SetMaxIdleConns(p.MaxIdleConns)
	db.SetConnMaxLifetime(p.ConnMaxLifetime)
	db.SetConnMaxIdleTime(p.ConnMaxIdleTime)
	ctx, cancel := context.WithTimeout(ctx, p.StartupTimeout)
	defer cancel()
	// The error reported is the last one before the deadline: the ping
	// the deadline cuts short says only "i/o timeout".
	var last error
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return db, nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			db.Close()
			return nil, fmt.Errorf("mysql %s did not answer within %v: %w", target, p.StartupTimeout, dsnsafe.Err(last, cfg.Passwd))
		case <-time.After(time.Second):
		}
	}
}
