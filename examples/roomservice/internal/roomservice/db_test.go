package roomservice

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestPoolNeverExceedsMaxOpenConns: with the config's defaults, more
// concurrent requests than max_open_conns wait for a connection instead
// of opening more: the server sees at most max_open_conns of ours (issue
// 14: 80 concurrent requests once opened 76 of the server's 151).
func TestPoolNeverExceedsMaxOpenConns(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	cfg := Config{MySQL: MySQLConfig{DSN: d.DSN}}.WithDefaults().MySQL
	db, err := cfg.Open(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	// Each request takes a connection and holds it until release closes.
	const requests = DefaultMaxOpenConns + 10
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseAll)
	held := make(chan *sql.Conn, requests)
	errs := make(chan error, requests)
	for range requests {
		go func() {
			conn, err := db.Conn(ctx)
			if err != nil {
				errs <- err
				return
			}
			held <- conn
			<-release
			errs <- conn.Close()
		}()
	}
	// Wait until every request holds a connection or waits for one.
	outboxtest.Eventually(t, "every request holds or waits for a connection", func() bool {
		s := db.Stats()
		return s.InUse+int(s.WaitCount) >= requests
	})

	server := testutil.OpenDSN(t, testutil.ServerDSN(t))
	var onServer int
	require.NoError(t, server.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ?", d.Name).Scan(&onServer))
	stats := db.Stats()
	releaseAll()
	require.LessOrEqual(t, onServer, DefaultMaxOpenConns, "the server's connections of this pool")
	require.LessOrEqual(t, stats.OpenConnections, DefaultMaxOpenConns)
	require.Equal(t, DefaultMaxOpenConns, stats.MaxOpenConnections)
	require.Equal(t, DefaultMaxOpenConns, stats.InUse, "the pool is used up to its cap")
	for range requests {
		require.NoError(t, <-errs)
	}
	require.Len(t, held, requests, "the waiting requests got a connection once others let theirs go")
}
