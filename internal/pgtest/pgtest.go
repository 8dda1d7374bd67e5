// Package pgtest gives tests a real PostgreSQL: a fresh, uniquely named
// database per test, dropped when the test ends. It is internal/testutil's
// counterpart for the PostgreSQL store and inbox, in a module of its own
// so that the library's module does not require pgx.
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
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

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
	if container != nil {
		if err := container.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: terminate the test container: %v\n", err)
			if code == 0 {
				code = 1
			}
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
	if serverErr != nil {
		t.Fatalf("no PostgreSQL for tests: %v\n"+
			"Provide one: set %s to a server URL, e.g. %s='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable', "+
			"or run Docker so that testcontainers-go can start %s (or the image in %s).", serverErr, EnvDSN, EnvDSN, image(), EnvImage)
	}
	return serverDSN
}

func findServer() (string, *sql.DB, error) {
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		p, started, err := testutil.StartContainer("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("%s is not set and no container of %s could be started: %w", EnvDSN, image(), err)
		}
		container, dsn = p, started
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", nil, fmt.Errorf("%s: bad DSN (%s)", EnvDSN, Redact(dsn))
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&serverVersion); err != nil {
		_ = db.Close()
		return "", nil, fmt.Errorf("cannot reach the server at %s: %v", Redact(dsn), err)
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
	// DB is a database/sql pool (pgx's stdlib driver, registered as
	// "pgx") on the database, closed when the test ends.
	DB *sql.DB
	// DSN reaches the database, for further pools or child processes.
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
	d := &Database{DSN: withDatabase(t, server, name), Name: name}
	d.DB = d.Open(t)
	return d
}

// withDatabase returns dsn (a URL or a key=value string) with its
// database set to name.
func withDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("pgtest: %s: bad URL", EnvDSN)
		}
		u.Path = "/" + name
		return u.String()
	}
	return dsn + " dbname=" + name
}

// Open returns another, independent database/sql pool on the database, as
// a second process would have. It is closed when the test ends.
func (d *Database) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", d.DSN)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Pool returns an independent pgxpool on the database, for code that uses
// pgx directly. It is closed when the test ends.
func (d *Database) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), d.DSN)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
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

// Redact returns dsn with its password masked, for messages.
func Redact(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	pw := ""
	if cfg.Password != "" {
		pw = ":xxx"
	}
	return fmt.Sprintf("postgres://%s%s@%s:%d/%s", cfg.User, pw, cfg.Host, cfg.Port, cfg.Database)
}

// The stdlib driver registers itself as "pgx" on import.
var _ = stdlib.GetDefaultDriver
