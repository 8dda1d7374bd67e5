package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// previousRelease is the schema the store made before keys became binary
// (version 3, commit c98000e: text keys with PAD SPACE, no occurred_at,
// and a consumer registry without removal marks), with a message handed
// over to a consumer.
var previousRelease = append(oldSchema(3),
	"INSERT INTO room_outbox (event_id, event_key, event_type, payload, created_at, next_attempt_at, fanout)"+
		" VALUES ('old-1', 'room-\té', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 1)",
	"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('activity', 1, UTC_TIMESTAMP(6))",
	"INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_key, event_type, created_at, next_attempt_at)"+
		" SELECT 'activity', id, event_id, event_key, event_type, created_at, next_attempt_at FROM room_outbox",
)

// TestMigrateUpgradesThePreviousRelease: Migrate brings the previous
// release's tables up to date, keeping their data, and the store then
// works on them.
func TestMigrateUpgradesThePreviousRelease(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	for _, ddl := range previousRelease {
		_, err := d.DB.ExecContext(ctx, ddl)
		require.NoError(t, err)
	}
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	err = s.Verify(ctx)
	require.ErrorContains(t, err, "run Store.Migrate")
	for _, lack := range []string{"column occurred_at", "type of event_key (varchar, not varbinary)", "column removing of the companion table consumers",
		"type of event_key (varchar, not varbinary) of the companion table consumption"} {
		require.ErrorContains(t, err, lack)
	}
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	require.NoError(t, s.Migrate(ctx), "and again: nothing left to do")

	r, err := s.Get(ctx, "old-1")
	require.NoError(t, err)
	require.Equal(t, "room-\té", r.Key, "keys keep their bytes")
	b, err := consumer(t, s, "activity").Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	require.Equal(t, []string{"old-1"}, recordIDs(b.Records))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "new", Key: "room-\té ", Type: "T"}), "a trailing space is a key of its own now")
	_, err = s.RemoveConsumer(ctx, "activity")
	require.NoError(t, err)
}

// TestMigrateNamesWhatAPartialUpgradeLacks: a table someone upgraded by
// hand half way is finished by Migrate; one that is not ours is refused
// with what it lacks.
func TestMigrateNamesWhatAPartialUpgradeLacks(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	_, err := d.DB.ExecContext(ctx, "ALTER TABLE "+testTable+" DROP COLUMN writer_until")
	require.NoError(t, err)
	err = s.Verify(ctx)
	require.ErrorContains(t, err, "column writer_until")
	require.False(t, strings.Contains(err.Error(), "not made by this store"), err.Error())
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
}
