package mysql_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/readmerun"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestReadmeQuickStart builds the README's MySQL program outside the
// repository, as a new user would, and runs it against a scratch
// database: the order's event is delivered right after its commit.
func TestReadmeQuickStart(t *testing.T) {
	d := testutil.NewDatabase(t)
	code := readmerun.Snippet(t, "mysql")
	out := readmerun.Run(t, code, "MYSQL_DSN="+d.DSN)
	require.Regexp(t, regexp.MustCompile(`delivered OrderPlaced \S+`), out)
	var n int
	require.NoError(t, d.DB.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, d.DB.QueryRow("SELECT COUNT(*) FROM orders_outbox").Scan(&n))
	require.Equal(t, 1, n)
}
