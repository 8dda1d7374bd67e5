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
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

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

var (
	serverOnce sync.Once
	serverDSN  string
	serverErr  error
	adminDB    *sql.DB
	// container is the program that started the container findServer
	// uses, if any.
	container *ContainerProcess
	// serverVersion is what the server's VERSION() said.
	serverVersion string
)

// Server describes the test server, for a test's log: its VERSION() and
// where it came from (EnvDSN or the container's image).
func Server(t testing.TB) string {
	t.Helper()
	ServerDSN(t)
	if container != nil {
		return fmt.Sprintf("%s, in a container of %s started by testcontainers", serverVersion, image())
	}
	return fmt.Sprintf("%s, from %s", serverVersion, EnvDSN)
}

// Main runs a package's tests and then terminates the container they
// started, if any, and returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if container != nil {
		if err := container.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: terminate the test container: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// ServerDSN returns the DSN of the test server (no database selected),
// starting a container if need be. It fails t if there is no server.
func ServerDSN(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() { serverDSN, adminDB, serverErr = findServer() })
	if serverErr != nil {
		t.Fatalf("no MySQL/MariaDB for tests: %v\n"+
			"Provide one: set %s to a server DSN, e.g. %s='root@tcp(127.0.0.1:3306)/', "+
			"or run Docker so that testcontainers-go can start %s (or the image in %s).", serverErr, EnvDSN, EnvDSN, image(), EnvImage)
	}
	return serverDSN
}

func findServer() (string, *sql.DB, error) {
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		var err error
		if dsn, err = startContainer(); err != nil {
			return "", nil, fmt.Errorf("%s is not set and no container of %s could be started: %w", EnvDSN, image(), err)
		}
	}
	cfg, err := dsnsafe.Parse(dsn) // the driver's errors can quote the password
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", EnvDSN, err)
	}
	cfg.DBName = ""
	dsn = cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&serverVersion); err != nil {
		_ = db.Close()
		return "", nil, fmt.Errorf("cannot reach the server at %s: %w", Redact(dsn), err)
	}
	return dsn, db, nil
}

// image is the container image to start.
func image() string {
	if img := os.Getenv(EnvImage); img != "" {
		return img
	}
	return DefaultImage
}

// Database is a fresh database on the test server, dropped when the test
// ends.
type Database struct {
	// DB is a connection pool on the database, closed when the test ends.
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
	if _, err := adminDB.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("testutil: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adminDB.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("testutil: drop database %s: %v", name, err)
		}
	})
	cfg, err := mysqldrv.ParseDSN(server)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	cfg.DBName = name
	d := &Database{DSN: cfg.FormatDSN(), Name: name}
	d.DB = d.Open(t)
	return d
}

// Open returns another, independent connection pool on the database, as a
// second process would have. It is closed when the test ends (before the
// database is dropped).
func (d *Database) Open(t testing.TB) *sql.DB {
	t.Helper()
	return OpenDSN(t, d.DSN)
}

// OpenDSN opens a pool on dsn and closes it when the test ends.
func OpenDSN(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testutil: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// KillConnections kills every server connection to the database except the
// one it runs on, as a network failure or a DBA would, and returns how
// many it killed.
func (d *Database) KillConnections(ctx context.Context) (int, error) {
	conn, err := adminDB.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx,
		"SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", d.Name)
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

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// databaseName makes a valid, unique database name (at most 64 characters)
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
	cfg, err := dsnsafe.Parse(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxx"
	}
	return cfg.FormatDSN()
}
