package postgres_test

import (
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver internal/pgtest opens its pools with

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// TestMain drops what the tests made, through pgtest.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestServerVersion says which server the tests ran on, for CI's version
// matrix: go test -v -run ServerVersion prints it.
func TestServerVersion(t *testing.T) {
	t.Logf("server version: %s", pgtest.Server(t))
}
