package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
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
	// Through the store, as an operator reads it (outboxctl, the
	// dashboard): the tables' layout is the store's business.
	store, err := mysql.New(db.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	records, err := store.List(context.Background(), mysql.ListFilter{Limit: 100})
	require.NoError(t, err)
	require.Len(t, records, 6, "RoomCreated; join: 2 events; gift: 3 events; the repeated gift: none")
	for _, r := range records {
		require.Equal(t, outbox.StatusPublished, r.Status, "every event ends published: %s", r.ID)
	}
	join, err := store.Get(context.Background(), report.JoinEventID)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPublished, join.Status)
	require.Equal(t, 1, join.Attempts, "the sync failure did not count; the worker's first try did")
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
