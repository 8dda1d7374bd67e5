package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// TestPgtestDatabase checks the test helper itself on a real server:
// internal/pgtest lives in the library's module, which registers no
// PostgreSQL driver, so its server tests run here, where pgx's is.
func TestPgtestDatabase(t *testing.T) {
	t.Log(pgtest.Server(t))
	d := pgtest.NewDatabase(t)
	var name string
	require.NoError(t, d.DB.QueryRow("SELECT current_database()").Scan(&name))
	require.Equal(t, d.Name, name)
	other := d.Open(t)
	require.NoError(t, other.Ping())
	n, err := d.KillConnections(context.Background())
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1, "the pools' connections were terminated")
}
