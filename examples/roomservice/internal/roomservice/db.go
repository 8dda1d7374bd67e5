package roomservice

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// openMySQL opens the pool with c's limits and waits (c.StartupTimeout,
// or ctx) until the server answers, as it may still be starting next to
// us. Zero limits take the defaults, so a pool is never unbounded. Its
// errors name the DSN's user, address and database, never its
// password.
func openMySQL(ctx context.Context, c MySQLConfig) (*sql.DB, error) {
	c = Config{MySQL: c}.WithDefaults().MySQL
	dsn, err := dsnsafe.Parse(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	target := dsnsafe.Target(dsn)
	connector, err := mysqldrv.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql %s: %w", target, dsnsafe.Err(err, dsn.Passwd))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(c.MaxOpenConns)
	db.SetMaxIdleConns(c.MaxIdleConns)
	db.SetConnMaxLifetime(c.ConnMaxLifetime)
	db.SetConnMaxIdleTime(c.ConnMaxIdleTime)
	ctx, cancel := context.WithTimeout(ctx, c.StartupTimeout)
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
			return nil, fmt.Errorf("mysql %s did not answer within %v: %w", target, c.StartupTimeout, dsnsafe.Err(last, dsn.Passwd))
		case <-time.After(time.Second):
		}
	}
}
