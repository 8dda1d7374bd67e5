package watermill_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestMain stops the tests' own RabbitMQ node, terminates the MySQL test
// container if the tests started one, and fails the run if a test left
// a goroutine behind.
func TestMain(m *testing.M) {
	code := testutil.Main(m)
	if err := stopPrivateRabbit(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the tests' RabbitMQ node:", err)
	}
	if code == 0 {
		// The test database's server-wide pool stays open (testutil).
		if err := goleak.Find(goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
			goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}
