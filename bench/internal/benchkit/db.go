package benchkit

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// OpenDB opens a database/sql pool on dsn through driver (registered by
// the caller) that keeps up to idle connections open between uses.
func OpenDB(driver, dsn string, idle int) (*sql.DB, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(idle)
	return db, nil
}

// WaitDone calls done every interval until it reports true or fails,
// and returns its error; what names the wait in the error of one that
// ctx ended or that is not done after limit.
func WaitDone(ctx context.Context, what string, limit, every time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
