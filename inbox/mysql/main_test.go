package mysql_test

import (
	"os"
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestMain terminates the test container, if the tests started one.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
