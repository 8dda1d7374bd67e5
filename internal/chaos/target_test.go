//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the worker processes' driver

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// A target is a store the suite runs against, on its own kind of server.
type target struct {
	name string
	// driver is the database/sql driver's name, for worker processes.
	driver string
	// newDatabase makes a fresh database on the test server.
	newDatabase func(t *testing.T) *database
	// newStore returns the store of the suite's table on db.
	newStore func(db *sql.DB) (chaosStore, error)
	// stop and start are the server's commands, unless the environment
	// variables stopEnv and startEnv give others.
	stop, start       string
	stopEnv, startEnv string
}

// chaosStore is what the suite needs of a store.
type chaosStore interface {
	backend.Store
	backend.StatsReader
	Migrate(ctx context.Context) error
}

// database is a fresh database of a target's test server.
type database struct {
	db  *sql.DB
	dsn string
	// server describes the server, for the figures.
	server string
	// killConnections kills every connection to the database but the
	// caller's, and returns how many it killed.
	killConnections func(ctx context.Context) (int, error)
}

// targets are the stores the suite runs against, in order.
var targets = []*target{
	{
		name: "mysql", driver: "mysql",
		newDatabase: func(t *testing.T) *database {
			d := testutil.NewDatabase(t)
			return &database{db: d.DB, dsn: d.DSN, server: testutil.Server(t), killConnections: d.KillConnections}
		},
		newStore: func(db *sql.DB) (chaosStore, error) { return mysql.New(db, mysql.Options{Table: table}) },
		stop:     "mariadb-admin --protocol=tcp -h127.0.0.1 -P3306 -uroot shutdown",
		// The pid file tells the shared server from any other mariadbd on
		// the machine (a private one for measurements, say): matched by
		// the binary alone, start-stop-daemon took another server for
		// this one and started nothing.
		start:   "start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid --exec /usr/sbin/mariadbd",
		stopEnv: "CHAOS_DB_STOP", startEnv: "CHAOS_DB_START",
	},
	{
		name: "postgres", driver: "pgx",
		newDatabase: func(t *testing.T) *database {
			d := pgtest.NewDatabase(t)
			return &database{db: d.DB, dsn: d.DSN, server: pgtest.Server(t), killConnections: d.KillConnections}
		},
		newStore: func(db *sql.DB) (chaosStore, error) { return postgres.New(db, postgres.Options{Table: table}) },
		// The machine's cluster (Debian's pg_ctlcluster); a fast stop
		// ends every session, as a crash or a failover would.
		stop:    "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main stop -m fast",
		start:   "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
		stopEnv: "CHAOS_PG_STOP", startEnv: "CHAOS_PG_START",
	},
}

// targetNamed returns the target called name, or nil.
func targetNamed(name string) *target {
	for _, tg := range targets {
		if tg.name == name {
			return tg
		}
	}
	return nil
}
