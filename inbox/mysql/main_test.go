package mysql_test

import (
	"os"
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestMain terminates the test container, if the tests started one.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// TestServerVersion says which server the tests ran on, for CI's version
// matrix: go test -v -run ServerVersion prints it.
func TestServerVersion(t *testing.T) {
	t.Logf("server version: %s", testutil.Server(t))
}
