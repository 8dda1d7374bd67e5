// Command testcontainer starts a database container for the repository's
// tests with testcontainers-go, prints a DSN of its server on one line of
// standard output, and terminates the container when its standard input
// ends (the test binary that started it closed it, or died).
//
//	go run .            # MySQL or MariaDB: root:test@tcp(HOST:PORT)/
//	go run . postgres   # PostgreSQL: postgres://postgres:test@HOST:PORT/postgres?sslmode=disable
//
// internal/testutil runs it when OUTBOXRELAY_TEST_MYSQL_DSN is not set,
// and internal/pgtest ("postgres") when OUTBOXRELAY_TEST_POSTGRES_DSN is
// not. It is a module of its own so that the library's module, whose
// tests use it, does not require testcontainers-go and its dependencies:
// a service that imports outbox and store/mysql lists a dozen modules,
// not fifty.
//
// The image is OUTBOXRELAY_TEST_MYSQL_IMAGE (mysql:8.4 by default), or
// for "postgres" OUTBOXRELAY_TEST_POSTGRES_IMAGE (postgres:17 by default:
// an official image, or one of .ci/images's, which take the same
// POSTGRES_PASSWORD). Every container carries the label
// org.outboxrelay.test, so that a crashed run's leftovers can be found.
// Its value is OUTBOXRELAY_TEST_RUN when that is set (else "1"), so that
// a run (CI, say) can find and remove its own leftovers without touching
// another run's containers on the same machine.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/go-sql-driver/mysql"   // wait.ForSQL's driver for MySQL and MariaDB
	_ "github.com/jackc/pgx/v5/stdlib" // and for PostgreSQL, as "pgx"
)

// The settings the test helpers and this program share.
const (
	label  = "org.outboxrelay.test"
	envRun = "OUTBOXRELAY_TEST_RUN" // the label's value
	// password of the container's administrator (root, postgres):
	// reachable only from this machine, for one test binary's life.
	password = "test"
)

// server is a kind of database this program starts.
type server struct {
	envImage, defaultImage string
	port                   string // the container's, e.g. "3306/tcp"
	env                    map[string]string
	cmd                    []string // the server's arguments, if any
	driver                 string   // database/sql's, for wait.ForSQL
	// dsn reaches the server at host:port as its administrator.
	dsn func(host, port string) string
}

// mysqlServer is MySQL or MariaDB: the official images of both (and
// .ci/images's MariaDB ones) take their own root password variable.
var mysqlServer = server{
	envImage:     "OUTBOXRELAY_TEST_MYSQL_IMAGE",
	defaultImage: "mysql:8.4",
	port:         "3306/tcp",
	env: map[string]string{
		"MYSQL_ROOT_PASSWORD":   password,
		"MARIADB_ROOT_PASSWORD": password,
	},
	driver: "mysql",
	dsn: func(host, port string) string {
		return fmt.Sprintf("root:%s@tcp(%s)/", password, net.JoinHostPort(host, port))
	},
}

// postgresServer is PostgreSQL: the official images and .ci/images's
// both take POSTGRES_PASSWORD for the user postgres.
var postgresServer = server{
	envImage:     "OUTBOXRELAY_TEST_POSTGRES_IMAGE",
	defaultImage: "postgres:17",
	port:         "5432/tcp",
	env:          map[string]string{"POSTGRES_PASSWORD": password},
	// store/postgres's tests prepare transactions (two-phase commit),
	// which the server refuses by default.
	cmd:    []string{"postgres", "-c", "max_prepared_transactions=64"},
	driver: "pgx",
	dsn: func(host, port string) string {
		u := url.URL{
			Scheme:   "postgres",
			User:     url.UserPassword("postgres", password),
			Host:     net.JoinHostPort(host, port),
			Path:     "/postgres",
			RawQuery: "sslmode=disable",
		}
		return u.String()
	},
}

func main() {
	// A test binary that died leaves our standard output and error broken
	// pipes. Writing there must fail quietly instead of killing this
	// program (Go's default for SIGPIPE on those) before the container is
	// gone: a run killed while the container starts still removes it.
	signal.Ignore(syscall.SIGPIPE)
	srv, err := choose(os.Args[1:])
	if err == nil {
		err = run(srv, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcontainer: %v\n", err)
		os.Exit(1)
	}
}

// choose returns the server that args name: none for MySQL or MariaDB,
// "postgres" for PostgreSQL.
func choose(args []string) (server, error) {
	switch {
	case len(args) == 0:
		return mysqlServer, nil
	case len(args) == 1 && args[0] == "postgres":
		return postgresServer, nil
	}
	return server{}, errors.New("usage: testcontainer [postgres]")
}

// run starts the container, writes its DSN to out, and terminates the
// container once in ends.
func run(srv server, in io.Reader, out io.Writer) error {
	// The MySQL driver logs each refused connection while the server
	// starts.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	image := os.Getenv(srv.envImage)
	if image == "" {
		image = srv.defaultImage
	}
	c, dsn, err := start(srv, image)
	if c != nil {
		defer func() {
			if err := testcontainers.TerminateContainer(c); err != nil {
				fmt.Fprintf(os.Stderr, "testcontainer: terminate: %v\n", err)
			}
		}()
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", image, err)
	}
	if _, err := fmt.Fprintln(out, dsn); err != nil {
		return err
	}
	waitForEnd(in)
	return nil
}

// waitForEnd returns when the test binary is done with the container: it
// closed our standard input, or died (which closes it too), or an
// interrupt reached the process group.
func waitForEnd(in io.Reader) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(stop)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(in))
		close(eof)
	}()
	select {
	case <-eof:
	case <-stop:
	}
}

// start starts image and waits until it answers SQL: a wait that fits
// every image, where a log line would not. The official MySQL, MariaDB
// and PostgreSQL images start a server for their set-up first, with
// networking off, and log "ready" for it too; the first answer on the
// port is the real server's.
func start(srv server, image string) (testcontainers.Container, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithCmd(srv.cmd...),
		testcontainers.WithExposedPorts(srv.port),
		testcontainers.WithEnv(srv.env),
		testcontainers.WithLabels(map[string]string{label: runLabel()}),
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute,
			wait.ForSQL(srv.port, srv.driver, func(host string, port network.Port) string { return srv.dsn(host, port.Port()) }).
				WithPollInterval(500*time.Millisecond)),
	)
	if err != nil {
		return c, "", err
	}
	host, err := c.Host(ctx)
	if err != nil {
		return c, "", err
	}
	port, err := c.MappedPort(ctx, srv.port)
	if err != nil {
		return c, "", err
	}
	return c, srv.dsn(host, port.Port()), nil
}

// runLabel is the value of the containers' label: OUTBOXRELAY_TEST_RUN,
// or "1".
func runLabel() string {
	if v := os.Getenv(envRun); v != "" {
		return v
	}
	return "1"
}
