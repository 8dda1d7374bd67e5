// Package testutil gives tests a real MySQL or MariaDB: a fresh, uniquely
// named database per test, dropped when the test ends. It never fakes SQL.
// (And RequestAs: an HTTP request as a browser at a given host sends it.)
//
// Where the server comes from, in order:
//
//  1. the environment variable OUTBOXRELAY_TEST_MYSQL_DSN, a server DSN
//     such as root@tcp(127.0.0.1:3306)/ (CI sets it to the machine's
//     MariaDB);
//  2. otherwise a container started once per test binary through
//     testcontainers-go, where Docker is available: the image named by
//     OUTBOXRELAY_TEST_MYSQL_IMAGE, by default the official mysql:8.4
//     (MySQL and MariaDB images alike: the official ones, or the local
//     ones .ci/images builds). The program internal/testcontainer, a
//     module of its own, starts it and terminates it when its standard
//     input ends: a package's TestMain calls Main, which ends it when the
//     tests end, and a test binary that dies ends it too. (A module of its
//     own, so that the library's module, whose tests use it, does not
//     require testcontainers-go: a service importing outbox and
//     store/mysql would list its fifty modules.)
//  3. otherwise the test fails with a message saying how to provide one.
//     Database tests never skip silently.
//
// testcontainers-go reads its own settings from the environment; on a
// machine that cannot pull its reaper image, set
// TESTCONTAINERS_RYUK_DISABLED=true (the program still removes the
// container, and every container carries the label ContainerLabel, so
// that leftovers can be found and removed).
package testutil

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// EnvDSN names the environment variable that points tests at an existing
// server.
const EnvDSN = "OUTBOXRELAY_TEST_MYSQL_DSN"

// EnvImage names the environment variable that chooses the image started
// when EnvDSN is not set.
const EnvImage = "OUTBOXRELAY_TEST_MYSQL_IMAGE"

// DefaultImage is the image started when neither EnvDSN nor EnvImage is
// set.
const DefaultImage = "mysql:8.4"

// ContainerLabel is set on every container the tests start, with the
// value of OUTBOXRELAY_TEST_RUN when that is set (else "1").
const ContainerLabel = "org.outboxrelay.test"

func init() {
	// The driver logs dropped connections on its own global logger, which
	// tests that kill connections on purpose would flood. Set here, before
	// any test starts a goroutine, as SetLogger is not synchronised.
	_ = mysqldrv.SetLogger(log.New(io.Discard, "", 0))
}

// mysqlServers are the tests' MySQL or MariaDB servers.
var mysqlServers = NewServers(Kind{
	Name:         "MySQL/MariaDB",
	Package:      "testutil",
	EnvDSN:       EnvDSN,
	EnvImage:     EnvImage,
	DefaultImage: DefaultImage,
	ExampleDSN:   "root@tcp(127.0.0.1:3306)/",
	Driver:       "mysql",
	Prepare: func(dsn string) (string, error) {
		cfg, err := dsnsafe.Parse(dsn) // the driver's errors can quote the password
		if err != nil {
			return "", err
		}
		cfg.DBName = ""
		return cfg.FormatDSN(), nil
	},
	VersionSQL: "SELECT VERSION()",
	Redact:     Redact,
	CreateSQL:  "CREATE DATABASE `%s` CHARACTER SET utf8mb4",
	DropSQL:    "DROP DATABASE IF EXISTS `%s`",
	WithDatabase: func(server, name string) (string, error) {
		cfg, err := mysqldrv.ParseDSN(server)
		if err != nil {
			return "", err
		}
		cfg.DBName = name
		return cfg.FormatDSN(), nil
	},
	Kill: killConnections,
})

// Server describes the test server, for a test's log: its VERSION() and
// where it came from (EnvDSN or the container's image).
func Server(t testing.TB) string {
	t.Helper()
	return mysqlServers.Server(t)
}

// Main runs a package's tests and then terminates the container they
// started, if any, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
func Main(m *testing.M) int { return mysqlServers.Main(m) }

// ServerDSN returns the DSN of the test server (no database selected),
// starting a container if need be. It fails t if there is no server.
func ServerDSN(t testing.TB) string {
	t.Helper()
	return mysqlServers.ServerDSN(t)
}

// NewDatabase creates a fresh, uniquely named database for t.
func NewDatabase(t testing.TB) *Database {
	t.Helper()
	return mysqlServers.NewDatabase(t)
}

// OpenDSN opens a pool on dsn and closes it when the test ends.
func OpenDSN(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	return mysqlServers.OpenDSN(t, dsn)
}

// killConnections kills every connection to database name except
// admin's own (Database.KillConnections).
func killConnections(ctx context.Context, admin *sql.DB, name string) (int, error) {
	conn, err := admin.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx,
		"SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", name)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	killed := 0
	for _, id := range ids {
		// The connection may be gone by now; that is fine.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			killed++
		}
	}
	return killed, nil
}

// Redact returns dsn with its password masked, for messages.
func Redact(dsn string) string {
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxx"
	}
	return cfg.FormatDSN()
}
