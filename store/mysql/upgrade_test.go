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
// (commit c98000e): text keys with PAD SPACE, no occurred_at, and a
// consumer registry without removal marks.
var previousRelease = []string{
	`CREATE TABLE room_outbox (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  event_type VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload LONGBLOB NOT NULL,
  headers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count INT UNSIGNED NOT NULL DEFAULT 0,
  last_error VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  published_at DATETIME(6) NULL,
  lease_owner VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  lease_token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  fanout TINYINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id), UNIQUE KEY uk_event_id (event_id), KEY idx_due (status, next_attempt_at, id),
  KEY idx_key (status, event_key, id), KEY idx_fanout (fanout, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE room_outbox_consumers (
  name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  start_seq BIGINT UNSIGNED NOT NULL,
  backfill_cursor BIGINT UNSIGNED NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE room_outbox_consumption (
  consumer VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id BIGINT UNSIGNED NOT NULL,
  event_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  event_type VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count INT UNSIGNED NOT NULL DEFAULT 0,
  last_error VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  published_at DATETIME(6) NULL,
  lease_owner VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  lease_token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (consumer, msg_id), UNIQUE KEY uk_event_id (consumer, event_id),
  KEY idx_due (consumer, status, next_attempt_at, msg_id), KEY idx_key (consumer, status, event_key, msg_id), KEY idx_msg (msg_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	"INSERT INTO room_outbox (event_id, event_key, event_type, payload, created_at, next_attempt_at, fanout)" +
		" VALUES ('old-1', 'room-\té', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 1)",
	"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('activity', 1, UTC_TIMESTAMP(6))",
	"INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_key, event_type, created_at, next_attempt_at)" +
		" SELECT 'activity', id, event_id, event_key, event_type, created_at, next_attempt_at FROM room_outbox",
}

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
	_, err := d.DB.ExecContext(ctx, "ALTER TABLE "+testTable+" DROP INDEX idx_fanout")
	require.NoError(t, err)
	err = s.Verify(ctx)
	require.ErrorContains(t, err, "index idx_fanout")
	require.False(t, strings.Contains(err.Error(), "not made by this store"), err.Error())
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
}
