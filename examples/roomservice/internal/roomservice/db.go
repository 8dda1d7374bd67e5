package roomservice

import (
	"context"
	"database/sql"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// openMySQL opens the pool with c's limits and waits (c.StartupTimeout,
// or ctx) until the server answers, as it may still be starting next to
// us. Zero limits take the defaults, so a pool is never unbounded. Its
// errors name the DSN's user, address and database, never its
// password.
func openMySQL(ctx context.Context, c MySQLConfig) (*sql.DB, error) {
	c = Config{MySQL: c}.WithDefaults().MySQL
	return svckit.OpenMySQL(ctx, c.DSN, svckit.Pool{MaxOpenConns: c.MaxOpenConns, MaxIdleConns: c.MaxIdleConns,
		ConnMaxLifetime: c.ConnMaxLifetime, ConnMaxIdleTime: c.ConnMaxIdleTime, StartupTimeout: c.StartupTimeout})
}
