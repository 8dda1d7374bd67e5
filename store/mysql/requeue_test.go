package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// kill makes records dead the way a worker does: claim, then settle dead.
func kill(t *testing.T, s *mysql.Store, errText string, ids ...string) {
	t.Helper()
	outcomes := make([]backend.Outcome, len(ids))
	for i, id := range ids {
		outcomes[i] = backend.Outcome{ID: id, Kind: backend.OutcomeDead, Error: errText}
	}
	settleAs(t, s, outcomes...)
}

func TestRequeueOne(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "dead-1", Type: "T"}, outbox.Message{ID: "live-1", Type: "T"}))
	kill(t, s, "group gone", "dead-1")

	require.NoError(t, s.Requeue(ctx, "dead-1"))
	r, err := s.Get(ctx, "dead-1")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts, "a fresh schedule")
	require.Equal(t, "group gone", r.LastError, "the last error stays for the record")
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"dead-1", "live-1"}, []string{b.Records[0].ID, b.Records[1].ID}, "due at once")

	err = s.Requeue(ctx, "live-1")
	require.ErrorIs(t, err, mysql.ErrNotDead, "refused: only dead letters are requeued")
	require.ErrorContains(t, err, "status pending")
	require.ErrorIs(t, s.Requeue(ctx, "nope"), outbox.ErrNotFound)
}

func TestRequeueDeadByFilterInBoundedBatches(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	var ms []outbox.Message
	for i := range 30 {
		typ := "RoomGiftSent"
		if i%3 == 0 {
			typ = "RoomUserJoined"
		}
		// A writer's clock says nothing about age: only "old" is old on
		// the database's clock.
		ms = append(ms, outbox.Message{ID: fmt.Sprintf("d-%02d", i), Key: fmt.Sprintf("room-%d", i%2), Type: typ, CreatedAt: time.Now().Add(-48 * time.Hour)})
	}
	ms = append(ms, outbox.Message{ID: "old", Type: "RoomGiftSent"}, outbox.Message{ID: "pending", Type: "RoomGiftSent"})
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))
	_, err := d.DB.ExecContext(ctx, "UPDATE "+testTable+" SET created_at = created_at - INTERVAL 48 HOUR WHERE event_id = 'old'")
	require.NoError(t, err)
	var deadIDs []string
	for _, m := range ms[:30] {
		deadIDs = append(deadIDs, m.ID)
	}
	kill(t, s, "ErrorCode 10010: group not found (50%_done)", deadIDs[:20]...)
	kill(t, s, "ErrorCode 80001: content filtered", deadIDs[20:]...)
	kill(t, s, "ErrorCode 10010: group not found (50%_done)", "old")

	count := func(f mysql.DeadFilter) int {
		n, err := s.CountDead(ctx, f)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 31, count(mysql.DeadFilter{}))
	require.Equal(t, 1, count(mysql.DeadFilter{OlderThan: 24 * time.Hour}))
	require.Equal(t, 21, count(mysql.DeadFilter{ErrorContains: "50%_done"}), "matched literally")
	require.Zero(t, count(mysql.DeadFilter{ErrorContains: "50%done"}), "% is not a wildcard")
	require.Equal(t, 10, count(mysql.DeadFilter{ErrorContains: "80001"}))

	// Bulk requeue by type and key, 3 rows per statement.
	f := mysql.DeadFilter{Type: "RoomGiftSent", Key: "room-1", ErrorContains: "10010"}
	want := count(f)
	require.Equal(t, 7, want)
	n, err := s.RequeueDead(ctx, f, mysql.RequeueOptions{BatchSize: 3})
	require.NoError(t, err)
	require.Equal(t, want, n)
	require.Zero(t, count(f))
	require.Equal(t, 31-want, count(mysql.DeadFilter{}), "the rest stay dead")

	// A limit stops early; then the age filter.
	n, err = s.RequeueDead(ctx, mysql.DeadFilter{ErrorContains: "80001"}, mysql.RequeueOptions{BatchSize: 4, Limit: 6})
	require.NoError(t, err)
	require.Equal(t, 6, n)
	require.Equal(t, 4, count(mysql.DeadFilter{ErrorContains: "80001"}))
	n, err = s.RequeueDead(ctx, mysql.DeadFilter{OlderThan: 24 * time.Hour}, mysql.RequeueOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r, err := s.Get(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, r.Status)

	_, err = s.RequeueDead(ctx, mysql.DeadFilter{}, mysql.RequeueOptions{BatchSize: mysql.MaxRequeueBatch + 1})
	require.ErrorContains(t, err, "BatchSize")
	p, err := s.Get(ctx, "pending")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, p.Status, "never touched: it was not dead")
}

func TestMigrateUpgradesAnOlderTable(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "kept", Type: "T"}))
	// Half of version 9's steps undone: no gaps table, no writer_until.
	for _, ddl := range []string{
		"ALTER TABLE " + testTable + " DROP COLUMN writer_until",
		"DROP TABLE " + testTable + "_gaps",
	} {
		_, err := d.DB.ExecContext(ctx, ddl)
		require.NoError(t, err)
	}
	require.ErrorContains(t, s.Verify(ctx), "column writer_until")
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	_, err := s.Get(ctx, "kept")
	require.NoError(t, err, "data survives the upgrade")
	require.NoError(t, s.AddConsumer(ctx, "audit", mysql.StartBeginning), "the consumer tables are back")
}

// TestTrailingSpacesInIDsAreRejected: IDs compare with PAD SPACE, so one
// ending in a space is refused; keys are binary, so "room" and "room "
// are two keys.
func TestTrailingSpacesInIDsAreRejected(t *testing.T) {
	d := testutil.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	err := s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "a ", Type: "T"})
	require.ErrorIs(t, err, outbox.ErrInvalidMessage)
	require.ErrorContains(t, err, "ends in a space")

	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "b", Type: "T", Key: "room "}, outbox.Message{ID: "c", Type: "T", Key: "room"}))
	n, err := s.CountDead(ctx, mysql.DeadFilter{Key: "room"})
	require.NoError(t, err)
	require.Zero(t, n)
	recs, err := s.List(ctx, mysql.ListFilter{Key: "room", Limit: 10})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "c", recs[0].ID, `"room " is another key`)
}
