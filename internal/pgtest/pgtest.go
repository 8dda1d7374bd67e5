// Package pgtest gives tests a real PostgreSQL: a fresh, uniquely named
// database per test, dropped when the test ends. It is internal/testutil's
// counterpart for the PostgreSQL store and inbox.
//
// It lives in the library's module and imports no PostgreSQL driver: it
// opens its pools through database/sql under the driver name "pgx", which
// the calling test binary registers (pgx's stdlib package does, on
// import; store/postgres imports it). So the library's module does not
// require pgx, and no published module requires a test-helper module.
//
// Where the server comes from, in order:
//
//  1. the environment variable OUTBOXRELAY_TEST_POSTGRES_DSN, a URL such
//     as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable (CI
//     sets it to the machine's PostgreSQL); the database it names is where
//     the test databases are created from;
//  2. otherwise a container started once per test binary by the program
//     internal/testcontainer ("go run . postgres"), from the image named by
//     OUTBOXRELAY_TEST_POSTGRES_IMAGE (by default postgres:17; .ci/images
//     builds local images of 15 and 17);
//  3. otherwise the test fails with a message saying how to provide one.
//     Database tests never skip silently.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// EnvDSN names the environment variable that points tests at an existing
// server.
const EnvDSN = "OUTBOXRELAY_TEST_POSTGRES_DSN"

// EnvImage names the environment variable that chooses the image started
// when EnvDSN is not set.
const EnvImage = "OUTBOXRELAY_TEST_POSTGRES_IMAGE"

// DefaultImage is the image started when neither EnvDSN nor EnvImage is
// set.
const DefaultImage = "postgres:17"

// DriverName is the database/sql driver the pools are opened with. The
// test binary registers it, by importing github.com/jackc/pgx/v5/stdlib
// (directly, or through store/postgres).
const DriverName = "pgx"

// servers are the tests' PostgreSQL servers.
var servers = testutil.NewServers(testutil.Kind{
	Name:          "PostgreSQL",
	Package:       "pgtest",
	EnvDSN:        EnvDSN,
	EnvImage:      EnvImage,
	DefaultImage:  DefaultImage,
	ExampleDSN:    "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	ContainerArgs: []string{"postgres"},
	Driver:        DriverName,
	Check:         checkDriver,
	VersionSQL:    "SELECT version()",
	Redact:        Redact,
	RedactErr: func(err error, dsn string) error {
		return errors.New(withoutPassword(err.Error(), dsn))
	},
	CreateSQL:    `CREATE DATABASE "%s"`,
	DropSQL:      `DROP DATABASE IF EXISTS "%s" WITH (FORCE)`, // WITH (FORCE) ends the sessions a test left behind (PostgreSQL 13+)
	WithDatabase: withDatabase,
	Kill: func(ctx context.Context, admin *sql.DB, name string) (int, error) {
		var n int
		err := admin.QueryRowContext(ctx,
			`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		  WHERE datname = $1 AND pid <> pg_backend_pid()) AS t`, name).Scan(&n)
		return n, err
	},
})

// Main runs a package's tests and then terminates the container they
// started, if any, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int { return servers.Main(m) }

// StopContainer terminates the container the tests started, if any: for
// a TestMain that already calls another package's Main (testutil.Main,
// say), and so cannot call Main too.
//
//	code := testutil.Main(m)
//	if err := pgtest.StopContainer(); err != nil && code == 0 { code = 1 }
func StopContainer() error { return servers.StopContainer() }

// Server describes the test server, for a test's log: its version and
// where it came from.
func Server(t testing.TB) string {
	t.Helper()
	return servers.Server(t)
}

// ServerDSN returns the URL of the test server's maintenance database,
// starting a container if need be. It fails t if there is no server.
func ServerDSN(t testing.TB) string {
	t.Helper()
	return servers.ServerDSN(t)
}

// errNoDriver is returned when the test binary registered no driver
// named DriverName.
var errNoDriver = errors.New("no database/sql driver named " + DriverName +
	` in this test binary: import _ "github.com/jackc/pgx/v5/stdlib" in one of the package's _test.go files`)

// checkDriver reports errNoDriver unless the test binary registered
// DriverName.
func checkDriver() error {
	if !slices.Contains(sql.Drivers(), DriverName) {
		return errNoDriver
	}
	return nil
}

// Database is a fresh database on the test server, dropped when the test
// ends: its DB is a database/sql pool (driver DriverName), and its DSN
// reaches it for further pools (pgxpool.New, say) or child processes.
type Database = testutil.Database

// NewDatabase creates a fresh, uniquely named database for t.
func NewDatabase(t testing.TB) *Database {
	t.Helper()
	return servers.NewDatabase(t)
}

// withDatabase returns dsn (a URL or a key=value string) with its
// database set to name.
func withDatabase(dsn, name string) (string, error) {
	if isURL(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("%s: bad URL", EnvDSN)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}

func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// kvPassword matches the password of a key=value DSN, quoted or not.
var kvPassword = regexp.MustCompile(`(^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)

// Redact returns dsn with its password masked, for messages: a URL's
// as url.URL.Redacted does, a key=value string's password=… as
// password=xxxxx.
func Redact(dsn string) string {
	if !isURL(dsn) {
		return kvPassword.ReplaceAllString(dsn, "${1}password=xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	return u.Redacted()
}

// withoutPassword removes dsn's password from text (a driver's error
// that quotes its configuration).
func withoutPassword(text, dsn string) string {
	var pw string
	if isURL(dsn) {
		if u, err := url.Parse(dsn); err == nil {
			pw, _ = u.User.Password()
		}
	} else if m := kvPassword.FindStringSubmatch(dsn); m != nil {
		pw = strings.Trim(m[2], "'")
	}
	if pw == "" {
		return text
	}
	return strings.ReplaceAll(text, pw, "xxxxx")
}
