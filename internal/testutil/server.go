package testutil

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind is what differs between the kinds of test servers (MySQL or
// MariaDB here, PostgreSQL in internal/pgtest): where the tests find one,
// and how a test's database is made, reached and dropped. The rest, one
// server per test binary and a fresh database per test, is Servers'.
type Kind struct {
	// Name says what the tests need, for the failure of a test that
	// has none: "MySQL/MariaDB".
	Name string
	// Package prefixes the helpers' failures: "testutil".
	Package string
	// EnvDSN, EnvImage and DefaultImage: the environment variable that
	// points the tests at a server, the one that chooses the image
	// started when it is not set, and the image then started by default.
	EnvDSN, EnvImage, DefaultImage string
	// ExampleDSN is a value of EnvDSN, for that failure.
	ExampleDSN string
	// ContainerArgs are internal/testcontainer's arguments
	// (StartContainer).
	ContainerArgs []string
	// Driver is the database/sql driver the pools are opened with.
	Driver string
	// Check, if set, says what keeps this test binary from using any
	// server (before one is looked for).
	Check func() error
	// Prepare, if set, turns EnvDSN's value or the container's into the
	// DSN of the server's maintenance database, refusing one it cannot
	// use.
	Prepare func(dsn string) (string, error)
	// VersionSQL reads the server's version.
	VersionSQL string
	// Redact masks a DSN's password; RedactErr, if set, removes dsn's
	// password from an error of the driver's that may quote it.
	Redact    func(dsn string) string
	RedactErr func(err error, dsn string) error
	// CreateSQL and DropSQL create and drop a database, named by %s.
	CreateSQL, DropSQL string
	// WithDatabase returns the server's DSN with its database set to
	// name.
	WithDatabase func(server, name string) (string, error)
	// Kill terminates every connection to database name but admin's,
	// and returns how many.
	Kill func(ctx context.Context, admin *sql.DB, name string) (int, error)
}

// Servers is one kind of test server and, once a test has asked for it,
// the server that the tests of the binary share: testutil's functions
// are those of its MySQL (or MariaDB) servers, and internal/pgtest's
// those of its PostgreSQL ones.
type Servers struct {
	Kind

	once      sync.Once
	dsn       string
	admin     *sql.DB // creates and drops the databases
	version   string  // what the server said its version is
	container *ContainerProcess
	checkErr  error // Check's
	err       error
}

// NewServers returns the servers of a kind; none is looked for before
// a test asks for one.
func NewServers(k Kind) *Servers { return &Servers{Kind: k} }

// Main runs a package's tests and then terminates the container they
// started, if any, and returns the exit code for os.Exit.
func (s *Servers) Main(m *testing.M) int {
	code := m.Run()
	if err := s.StopContainer(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: terminate the test container: %v\n", s.Package, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// StopContainer terminates the container the tests started, if any.
func (s *Servers) StopContainer() error {
	if s.container == nil {
		return nil
	}
	err := s.container.Stop()
	s.container = nil
	return err
}

// Server describes the test server, for a test's log: its version and
// where it came from (EnvDSN or the container's image).
func (s *Servers) Server(t testing.TB) string {
	t.Helper()
	s.ServerDSN(t)
	if s.container != nil {
		return fmt.Sprintf("%s, in a container of %s started by testcontainers", s.version, s.image())
	}
	return fmt.Sprintf("%s, from %s", s.version, s.EnvDSN)
}

// ServerDSN returns the DSN of the test server's maintenance database
// (for MySQL, none selected), starting a container if need be. It fails
// t if there is no server.
func (s *Servers) ServerDSN(t testing.TB) string {
	t.Helper()
	s.once.Do(s.find)
	if s.checkErr != nil {
		t.Fatalf("%s: %v", s.Package, s.checkErr)
	}
	if s.err != nil {
		t.Fatalf("no %s for tests: %v\n"+
			"Provide one: set %s to a server DSN, e.g. %s='%s', "+
			"or run Docker so that testcontainers-go can start %s (or the image in %s).", s.Name, s.err, s.EnvDSN, s.EnvDSN, s.ExampleDSN, s.image(), s.EnvImage)
	}
	return s.dsn
}

// find looks for the server: EnvDSN's, or else a container's.
func (s *Servers) find() {
	if s.Check != nil {
		if s.checkErr = s.Check(); s.checkErr != nil {
			return
		}
	}
	dsn := os.Getenv(s.EnvDSN)
	if dsn == "" {
		p, started, err := StartContainer(s.ContainerArgs...)
		if err != nil {
			s.err = fmt.Errorf("%s is not set and no container of %s could be started: %w", s.EnvDSN, s.image(), err)
			return
		}
		s.container, dsn = p, started
	}
	if s.Prepare != nil {
		var err error
		if dsn, err = s.Prepare(dsn); err != nil {
			s.err = fmt.Errorf("%s: %w", s.EnvDSN, err)
			return
		}
	}
	db, err := sql.Open(s.Driver, dsn)
	if err != nil {
		s.err = fmt.Errorf("%s: bad DSN (%s)", s.EnvDSN, s.Redact(dsn))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, s.VersionSQL).Scan(&s.version); err != nil {
		_ = db.Close()
		if s.RedactErr != nil {
			err = s.RedactErr(err, dsn)
		}
		s.err = fmt.Errorf("cannot reach the server at %s: %w", s.Redact(dsn), err)
		return
	}
	s.dsn, s.admin = dsn, db
}

// image is the container image to start.
func (s *Servers) image() string {
	if img := os.Getenv(s.EnvImage); img != "" {
		return img
	}
	return s.DefaultImage
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

	servers *Servers
}

// NewDatabase creates a fresh, uniquely named database for t.
func (s *Servers) NewDatabase(t testing.TB) *Database {
	t.Helper()
	server := s.ServerDSN(t)
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, fmt.Sprintf(s.CreateSQL, name)); err != nil {
		t.Fatalf("%s: create database %s: %v", s.Package, name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, fmt.Sprintf(s.DropSQL, name)); err != nil {
			t.Errorf("%s: drop database %s: %v", s.Package, name, err)
		}
	})
	dsn, err := s.WithDatabase(server, name)
	if err != nil {
		t.Fatalf("%s: %v", s.Package, err)
	}
	d := &Database{DSN: dsn, Name: name, servers: s}
	d.DB = d.Open(t)
	return d
}

// Open returns another, independent connection pool on the database, as a
// second process would have. It is closed when the test ends (before the
// database is dropped).
func (d *Database) Open(t testing.TB) *sql.DB {
	t.Helper()
	return d.servers.OpenDSN(t, d.DSN)
}

// OpenDSN opens a pool on dsn and closes it when the test ends.
func (s *Servers) OpenDSN(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(s.Driver, dsn)
	if err != nil {
		t.Fatalf("%s: open: %v", s.Package, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// KillConnections kills every server connection to the database except the
// one it runs on, as a network failure or a DBA would, and returns how
// many it killed.
func (d *Database) KillConnections(ctx context.Context) (int, error) {
	return d.servers.Kill(ctx, d.servers.admin, d.Name)
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// databaseName makes a valid, unique database name (at most 53 bytes,
// under MySQL's limit of 64 and PostgreSQL's of 63) that still tells
// which test it belongs to.
func databaseName(testName string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	base := unsafeChars.ReplaceAllString(strings.ToLower(testName), "_")
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return "ort_" + base + "_" + hex.EncodeToString(b[:])
}
