package postgres_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/readmerun"
)

// TestReadmeQuickStart builds the README's PostgreSQL program (pgx)
// outside the repository, as a new user would, and runs it against a
// scratch database: the order's event is delivered right after its
// commit.
func TestReadmeQuickStart(t *testing.T) {
	d := pgtest.NewDatabase(t)
	code := readmerun.Snippet(t, "postgres")
	out := readmerun.Run(t, code, "DATABASE_URL="+d.DSN)
	require.Regexp(t, regexp.MustCompile(`delivered OrderPlaced \S+`), out)
	var n int
	require.NoError(t, d.DB.QueryRow("SELECT count(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, d.DB.QueryRow("SELECT count(*) FROM orders_outbox").Scan(&n))
	require.Equal(t, 1, n)
}
