// Package testutil gives tests a real MySQL or MariaDB: a fresh, uniquely
// named database per test, dropped when the test ends. It never fakes SQL.
//
// Where the server comes from, in order:
//
//  1. the environment variable OUTBOXRELAY_TEST_MYSQL_DSN, a server DSN
//     such as root@tcp(127.0.0.1:3306)/ (CI sets it to the machine's
//     MariaDB);
//  2. otherwise a MySQL 8 container started once per test binary through
//     testcontainers-go, where Docker is available;
//  3. otherwise the test fails with a message saying how to provide one.
//     Database tests never skip silently.
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
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
)

// EnvDSN names the environment variable that points tests at an existing
// server.
const EnvDSN = "OUTBOXRELAY_TEST_MYSQL_DSN"

// ContainerImage is the MySQL image started where Docker is available and
// EnvDSN is not set.
const ContainerImage = "mysql:8.4"

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
)

// ServerDSN returns the DSN of the test server (no database selected),
// starting a container if need be. It fails t if there is no server.
func ServerDSN(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() { serverDSN, adminDB, serverErr = findServer() })
	if serverErr != nil {
		t.Fatalf("no MySQL/MariaDB for tests: %v\n"+
			"Provide one: set %s to a server DSN, e.g. %s='root@tcp(127.0.0.1:3306)/', "+
			"or run Docker so that testcontainers-go can start %s.", serverErr, EnvDSN, EnvDSN, ContainerImage)
	}
	return serverDSN
}

func findServer() (string, *sql.DB, error) {
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		var err error
		if dsn, err = startContainer(); err != nil {
			return "", nil, fmt.Errorf("%s is not set and no MySQL container could be started: %w", EnvDSN, err)
		}
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("%s: bad DSN: %w", EnvDSN, err)
	}
	cfg.DBName = ""
	dsn = cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return "", nil, fmt.Errorf("cannot reach the server at %s: %w", Redact(dsn), err)
	}
	return dsn, db, nil
}

// startContainer starts MySQL 8 in Docker. The container lives as long as
// the test binary; testcontainers' reaper removes it afterwards.
func startContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcmysql.Run(ctx, ContainerImage, tcmysql.WithUsername("root"), tcmysql.WithPassword("test"))
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx)
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
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxx"
	}
	return cfg.FormatDSN()
}
