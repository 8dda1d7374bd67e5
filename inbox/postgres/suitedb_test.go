package postgres_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
)

// inbox/inboxtest writes its own statements (the effect tables its
// handlers update through the inbox's transaction) with MySQL's ?
// placeholders, and PostgreSQL takes $1, $2, …. So that the suite runs
// unchanged, the conformance harness gives the suite and the inboxes
// pools whose connections rewrite ? to $n: pgx's stdlib connections
// with nothing else changed. The inbox's own SQL has no ? and passes
// through as it is; every other test uses plain pgtest pools.

// openSuiteDB opens a pool on dsn whose connections rewrite ?
// placeholders. It is closed when the test ends.
func openSuiteDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	db := sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

type rebindConnector struct{ driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return rebindConn{conn.(*stdlib.Conn)}, nil
}

// rebindConn is pgx's connection (every method of which it promotes,
// so database/sql sees the same capabilities) with the query text of
// the methods that take one rewritten.
type rebindConn struct{ *stdlib.Conn }

func (c rebindConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(query))
}

func (c rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// rebind replaces each ? outside quotes and comments with $1, $2, ….
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	var quote byte // the quote we are inside, or 0
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '-' && strings.HasPrefix(query[i:], "--"):
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				end = len(query) - i
			}
			b.WriteString(query[i : i+end])
			i += end - 1
			continue
		case ch == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                             "SELECT 1",
		"UPDATE t SET n = n + 1 WHERE k = ?":   "UPDATE t SET n = n + 1 WHERE k = $1",
		"VALUES (?, ?), ('?', \"?\")":          "VALUES ($1, $2), ('?', \"?\")",
		"SELECT 'it''s ?', ? -- what?\n, ?":    "SELECT 'it''s ?', $1 -- what?\n, $2",
		"INSERT INTO t VALUES ($1, $2)":        "INSERT INTO t VALUES ($1, $2)",
		"SELECT ? -- trailing comment, no \\n": "SELECT $1 -- trailing comment, no \\n",
	} {
		require.Equal(t, want, rebind(in), in)
	}
}
