// Command testcontainer starts a MySQL or MariaDB container for the
// repository's tests with testcontainers-go, prints a DSN of its server on
// one line of standard output, and terminates the container when its
// standard input ends (the test binary that started it closed it, or died).
//
// internal/testutil runs it when OUTBOXRELAY_TEST_MYSQL_DSN is not set. It
// is a module of its own so that the library's module, whose tests use
// it, does not require testcontainers-go and its dependencies: a service
// that imports outbox and store/mysql lists a dozen modules, not fifty.
//
// The image is OUTBOXRELAY_TEST_MYSQL_IMAGE (mysql:8.4 by default); every
// container carries the label org.outboxrelay.test, so that a crashed
// run's leftovers can be found. Its value is OUTBOXRELAY_TEST_RUN when
// that is set (else "1"), so that a run (CI, say) can find and remove
// its own leftovers without touching another run's containers on the
// same machine.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/go-sql-driver/mysql" // wait.ForSQL's driver
)

// The settings the test helper and this program share.
const (
	envImage     = "OUTBOXRELAY_TEST_MYSQL_IMAGE"
	defaultImage = "mysql:8.4"
	label        = "org.outboxrelay.test"
	envRun       = "OUTBOXRELAY_TEST_RUN" // the label's value
	// password of the container's root user: reachable only from this
	// machine, for one test binary's life.
	password = "test"
)

func main() {
	// A test binary that died leaves our standard output and error broken
	// pipes. Writing there must fail quietly instead of killing this
	// program (Go's default for SIGPIPE on those) before the container is
	// gone: a run killed while the container starts still removes it.
	signal.Ignore(syscall.SIGPIPE)
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "testcontainer: %v\n", err)
		os.Exit(1)
	}
}

// run starts the container, writes its DSN to out, and terminates the
// container once in ends.
func run(in io.Reader, out io.Writer) error {
	// The driver logs each refused connection while the server starts.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	image := os.Getenv(envImage)
	if image == "" {
		image = defaultImage
	}
	c, dsn, err := start(image)
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
// MySQL and MariaDB alike, where a log line would not (the official images
// start a server for their set-up first, with networking off, so the
// first answer on the port is the real server's).
func start(image string) (testcontainers.Container, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsnAt := func(host, port string) string {
		return fmt.Sprintf("root:%s@tcp(%s)/", password, net.JoinHostPort(host, port))
	}
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithExposedPorts("3306/tcp"),
		testcontainers.WithEnv(map[string]string{
			"MYSQL_ROOT_PASSWORD":   password,
			"MARIADB_ROOT_PASSWORD": password,
		}),
		testcontainers.WithLabels(map[string]string{label: runLabel()}),
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute,
			wait.ForSQL("3306/tcp", "mysql", func(host string, port network.Port) string { return dsnAt(host, port.Port()) }).
				WithPollInterval(500*time.Millisecond)),
	)
	if err != nil {
		return c, "", err
	}
	host, err := c.Host(ctx)
	if err != nil {
		return c, "", err
	}
	port, err := c.MappedPort(ctx, "3306/tcp")
	if err != nil {
		return c, "", err
	}
	return c, dsnAt(host, port.Port()), nil
}

// runLabel is the value of the containers' label: OUTBOXRELAY_TEST_RUN,
// or "1".
func runLabel() string {
	if v := os.Getenv(envRun); v != "" {
		return v
	}
	return "1"
}
