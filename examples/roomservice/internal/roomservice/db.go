package roomservice

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// openMySQL opens the pool with c's limits and waits (up to a minute, or
// ctx) until the server answers, as it may still be starting next to us.
func openMySQL(ctx context.Context, c MySQLConfig) (*sql.DB, error) {
	db, err := sql.Open("mysql", c.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db.SetMaxOpenConns(c.MaxOpenConns)
	db.SetMaxIdleConns(c.MaxIdleConns)
	db.SetConnMaxLifetime(c.ConnMaxLifetime)
	db.SetConnMaxIdleTime(c.ConnMaxIdleTime)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err = db.PingContext(ctx)
		if err == nil {
			return db, nil
		}
		select {
		case <-ctx.Done():
			db.Close()
			return nil, fmt.Errorf("mysql did not answer: %w", err)
		case <-time.After(time.Second):
		}
	}
}
