package roomservice

import (
	"context"
	"database/sql"
)

// openMySQL opens the pool with c's limits and waits (c.StartupTimeout,
// or ctx) until the server answers (svckit.MySQL.Open). Zero limits take
// the defaults, so a pool is never unbounded.
func openMySQL(ctx context.Context, c MySQLConfig) (*sql.DB, error) {
	return Config{MySQL: c}.WithDefaults().MySQL.Open(ctx)
}
