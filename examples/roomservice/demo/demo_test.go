package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestDemoOnTheTestDatabase runs the demo path against the test server and
// checks the final state itself, through its own connection.
func TestDemoOnTheTestDatabase(t *testing.T) {
	db := testutil.NewDatabase(t)
	var out bytes.Buffer
	report, err := runDemoOn(context.Background(), &out, db.DSN, 0)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	checkDemoState(t, db, report, out.String())
}

// TestDemoOnTheEmbeddedEngine runs the fallback the README's first command
// takes on a machine with no MySQL and no Docker.
func TestDemoOnTheEmbeddedEngine(t *testing.T) {
	dsn, stop, err := startEmbeddedMySQL()
	require.NoError(t, err)
	t.Cleanup(stop)
	var out bytes.Buffer
	db, err := demoMySQL(context.Background(), dsn, &out)
	require.NoError(t, err)
	t.Cleanup(db.cleanup)
	report, err := runDemoOn(context.Background(), &out, db.dsn, 1) // the engine serialised, as demoMySQL does for it
	t.Log("\n" + out.String())
	require.NoError(t, err)
	require.Equal(t, 1, report.IMDeliveries[report.JoinEventID])
}

func checkDemoState(t *testing.T, db *testutil.Database, report demoReport, out string) {
	t.Helper()
	var pending, total int
	require.NoError(t, db.DB.QueryRow("SELECT COUNT(*), COALESCE(SUM(status <> 'published'), 0) FROM room_outbox").Scan(&total, &pending))
	require.Equal(t, 6, total, "RoomCreated; join: 2 events; gift: 3 events; the repeated gift: none")
	require.Zero(t, pending, "every event ends published")

	var status string
	var attempts int
	require.NoError(t, db.DB.QueryRow("SELECT status, retry_count FROM room_outbox WHERE event_id = ?", report.JoinEventID).Scan(&status, &attempts))
	require.Equal(t, "published", status)
	require.Equal(t, 1, attempts, "the sync failure did not count; the worker's first try did")
	require.Equal(t, 1, report.IMDeliveries[report.JoinEventID], "the worker delivered the same event_id once")
	require.Equal(t, 1, report.IMDeliveries[report.GiftEventID])
	require.Len(t, report.IMDeliveries, 2, "only IM events went to IM")

	var members, heat int
	require.NoError(t, db.DB.QueryRow("SELECT (SELECT COUNT(*) FROM room_members WHERE room_id = 'room-1'), heat FROM rooms WHERE room_id = 'room-1'").Scan(&members, &heat))
	require.Equal(t, 1, members)
	require.Equal(t, 10+200, heat)
	require.Equal(t, []string{"draining: /readyz answers 503", "drain delay over", "http server stopped", "outbox worker stopped", "mysql closed"}, report.Lifecycle)
	for _, step := range []string{"command committed", "sync publish to Tencent IM failed", "HTTP response still succeeded", "status=pending retry_count=0", "worker republished the same event_id", "status=published", "shutdown:"} {
		require.Contains(t, out, step)
	}
}
