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
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

var (
	serverOnce    sync.Once
	serverDSN     string
	serverErr     error
	adminDB       *sql.DB
	container     *testutil.ContainerProcess
	serverVersion string
)

// Main runs a package's tests and then terminates the container they
// started, if any, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if err := StopContainer(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: terminate the test container: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Server describes the test server, for a test's log: its version and
// where it came from.
func Server(t testing.TB) string {
	t.Helper()
	ServerDSN(t)
	if container != nil {
		return fmt.Sprintf("%s, in a container of %s started by testcontainers", serverVersion, image())
	}
	return fmt.Sprintf("%s, from %s", serverVersion, EnvDSN)
}

// ServerDSN returns the URL of the test server's maintenance database,
// starting a container if need be. It fails t if there is no server.
func ServerDSN(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() { serverDSN, adminDB, serverErr = findServer() })
	if errors.Is(serverErr, errNoDriver) {
		t.Fatalf("pgtest: %v", serverErr)
	}
	if serverErr != nil {
		t.Fatalf("no PostgreSQL for tests: %v\n"+
			"Provide one: set %s to a server URL, e.g. %s='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable', "+
			"or run Docker so that testcontainers-go can start %s (or the image in %s).", serverErr, EnvDSN, EnvDSN, image(), EnvImage)
	}
	return serverDSN
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

func findServer() (string, *sql.DB, error) {
	if err := checkDriver(); err != nil {
		return "", nil, err
	}
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		p, started, err := testutil.StartContainer("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("%s is not set and no container of %s could be started: %w", EnvDSN, image(), err)
		}
		container, dsn = p, started
	}
	db, err := sql.Open(DriverName, dsn)
	if err != nil {
		return "", nil, fmt.Errorf("%s: bad DSN (%s)", EnvDSN, Redact(dsn))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&serverVersion); err != nil {
		_ = db.Close()
		return "", nil, fmt.Errorf("cannot reach the server at %s: %s", Redact(dsn), withoutPassword(err.Error(), dsn))
	}
	return dsn, db, nil
}

func image() string {
	if img := os.Getenv(EnvImage); img != "" {
		return img
	}
	return DefaultImage
}

// Database is a fresh database on the test server, dropped when the test
// ends.
type Database struct {
	// DB is a database/sql pool (driver DriverName) on the database,
	// closed when the test ends.
	DB *sql.DB
	// DSN reaches the database, for further pools (pgxpool.New, say) or
	// child processes.
	DSN string
	// Name is the database's name.
	Name string
}

// NewDatabase creates a fresh, uniquely named database for t.
func NewDatabase(t testing.TB) *Database {
	t.Helper()
	server := ServerDSN(t)
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adminDB.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// WITH (FORCE) ends the sessions a test left behind (PostgreSQL 13+).
		if _, err := adminDB.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(server, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	d := &Database{DSN: dsn, Name: name}
	d.DB = d.Open(t)
	return d
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

// Open returns another, independent database/sql pool on the database, as
// a second process would have. It is closed when the test ends.
func (d *Database) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open(DriverName, d.DSN)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// KillConnections terminates every server connection to the database
// except the one it runs on (pg_terminate_backend), as a network failure
// or a DBA would, and returns how many it terminated.
func (d *Database) KillConnections(ctx context.Context) (int, error) {
	var n int
	err := adminDB.QueryRowContext(ctx,
		`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		  WHERE datname = $1 AND pid <> pg_backend_pid()) AS t`, d.Name).Scan(&n)
	return n, err
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// databaseName makes a valid, unique database name (at most 63 bytes)
// that still tells which test it belongs to.
func databaseName(testName string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	base := unsafeChars.ReplaceAllString(strings.ToLower(testName), "_")
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return "ort_" + base + "_" + hex.EncodeToString(b[:])
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
