package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// version6 is the schema the store made before idx_head replaced idx_key
// (commit d21525f).
var version6 = []string{
	`CREATE TABLE room_outbox (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload         LONGBLOB NOT NULL,
  headers         TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  occurred_at     DATETIME(6) NULL,
  status          ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  fanout          TINYINT UNSIGNED NOT NULL DEFAULT 0,
  lease_id        BIGINT NOT NULL DEFAULT 0,
  lease_until     DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  lease_token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  lease           CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  UNIQUE KEY uk_event_id (event_id),
  KEY idx_due (status, next_attempt_at, id),
  KEY idx_key (status, event_key, id),
  KEY idx_fanout (fanout, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE room_outbox_consumers (
  name            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  start_seq       BIGINT UNSIGNED NOT NULL,
  backfill_cursor BIGINT UNSIGNED NULL,
  created_at      DATETIME(6) NOT NULL,
  removing        TINYINT UNSIGNED NOT NULL DEFAULT 0,
  add_token       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE room_outbox_consumption (
  consumer        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  msg_id          BIGINT UNSIGNED NOT NULL,
  event_id        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  event_key       VARBINARY(1020) NOT NULL DEFAULT '',
  event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  status          ENUM('pending', 'published', 'dead') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
  retry_count     INT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  created_at      DATETIME(6) NOT NULL,
  next_attempt_at DATETIME(6) NOT NULL,
  lease_id        BIGINT NOT NULL DEFAULT 0,
  lease_until     DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
  lease_token     CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  lease           CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  PRIMARY KEY (consumer, msg_id),
  UNIQUE KEY uk_event_id (consumer, event_id),
  KEY idx_due (consumer, status, next_attempt_at, msg_id),
  KEY idx_key (consumer, status, event_key, msg_id),
  KEY idx_msg (msg_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
}

// keyStates is the key_state of each record of the outbox table, by ID.
func keyStates(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, row := range rowStrings(t, db, "SELECT CONCAT(event_id, '=', key_state) FROM "+testTable) {
		id, state, _ := strings.Cut(row, "=")
		out[id] = state
	}
	return out
}

// hasIndex reports whether the outbox table has the index.
func hasIndex(t *testing.T, db *sql.DB, index string) bool {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?", testTable, index).Scan(&n))
	return n > 0
}

var ordered = backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute, Ordered: true}

// publish settles every record of b as published.
func publish(t *testing.T, s backend.Store, b backend.Batch) {
	t.Helper()
	outcomes := make([]backend.Outcome, len(b.Records))
	for i, r := range b.Records {
		outcomes[i] = backend.Outcome{ID: r.ID, Kind: backend.OutcomePublished}
	}
	res, err := s.Settle(context.Background(), b.Token, outcomes)
	require.NoError(t, err)
	require.Equal(t, len(outcomes), res.Applied)
}

// TestMigrateFromVersion6: the upgrade to version 7 gives every record
// the key state it needs (pending records count for their keys, published
// and dead ones do not), replaces idx_key with idx_head, and ordered
// claims then find the same heads as before; a dead letter requeued
// counts for its key again and is its key's head.
func TestMigrateFromVersion6(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, version6)
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_key, event_type, payload, status, retry_count, created_at, next_attempt_at) VALUES" +
			" ('dead', 'k1', 'T', 'p', 'dead', 5, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))," +
			" ('pub', 'k1', 'T', 'p', 'published', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))," +
			" ('p1', 'k1', 'T', 'p', 'pending', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND)," +
			" ('p2', 'k1', 'T', 'p', 'pending', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND)," +
			" ('u1', '', 'T', 'p', 'pending', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND)",
	})
	before := snapshot(t, d.DB)
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, st.Version)
	require.ErrorContains(t, s.Verify(ctx), "column key_state")

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)
	require.Equal(t, before, snapshot(t, d.DB), "every row and field kept")
	require.Equal(t, map[string]string{"dead": "done", "pub": "done", "p1": "pending", "p2": "pending", "u1": "pending"}, keyStates(t, d.DB))
	require.True(t, hasIndex(t, d.DB, "idx_head"))
	require.False(t, hasIndex(t, d.DB, "idx_key"), "an outcome moves no index entry of ordered claims")

	b, err := s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"u1", "p1"}, recordIDs(b.Records), "k1's head, and the unkeyed record")
	publish(t, s, b)
	require.Equal(t, "done", keyStates(t, d.DB)["p1"], "an ordered claim's outcome marks its record")

	// A dead letter requeued is its key's head again, before p2.
	require.NoError(t, s.Requeue(ctx, "dead"))
	require.Equal(t, "pending", keyStates(t, d.DB)["dead"])
	b, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"dead"}, recordIDs(b.Records))
}

// TestMigrateResumesAnInterruptedUpgradeToVersion7: tables whose upgrade
// to version 7 stopped after idx_head was added, before idx_key was
// dropped, are still version 6, and Migrate finishes the upgrade.
func TestMigrateResumesAnInterruptedUpgradeToVersion7(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, version6)
	execAll(t, d.DB, []string{
		"ALTER TABLE room_outbox ADD COLUMN key_state ENUM('pending', 'done') CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending'",
		"ALTER TABLE room_outbox ADD INDEX idx_head (key_state, event_key, id)",
	})
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, st.Version)
	require.Len(t, st.Pending, 3, "the removal of idx_key, and the record (two statements): %q", st.Pending)
	require.Contains(t, st.Pending[0], "DROP INDEX idx_key")
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	require.False(t, hasIndex(t, d.DB, "idx_key"))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaVersion, st.Version)
}

// TestUnorderedOutcomesLeaveTheKeyState: the outcome of an unordered
// claim leaves key_state as it is (so it moves its record in idx_due
// only); an ordered claim then passes over the records no longer pending,
// marks them, and claims each key's pending head, keyed or not.
func TestUnorderedOutcomesLeaveTheKeyState(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	var msgs []outbox.Message
	for i := range 6 {
		msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("a%d", i), Key: "A", Type: "T"}, outbox.Message{ID: fmt.Sprintf("b%d", i), Key: "B", Type: "T"},
			outbox.Message{ID: fmt.Sprintf("u%d", i), Type: "T"})
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msgs...))
	// An unordered claim takes the first four of each (in due order, all
	// due at once: by id) and publishes them.
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 12, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, b.Records, 12)
	publish(t, s, b)
	states := keyStates(t, d.DB)
	for _, id := range recordIDs(b.Records) {
		require.Equal(t, "pending", states[id], "%s: published, its key state left", id)
	}

	b, err = s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 8, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a4", "b4", "u4", "u5"}, recordIDs(b.Records), "each key's pending head, and the pending unkeyed records")
	states = keyStates(t, d.DB)
	for _, id := range []string{"a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3", "u0", "u1", "u2", "u3"} {
		require.Equal(t, "done", states[id], "%s: marked by the ordered claim", id)
	}
	for _, id := range []string{"a4", "a5", "b4", "b5", "u4", "u5"} {
		require.Equal(t, "pending", states[id], id)
	}
}

// TestOrderedOutcomesMarkTheKeyState: an ordered claim's published and
// dead outcomes mark their records done; a retry and a release leave
// them pending, and they stay their keys' heads.
func TestOrderedOutcomesMarkTheKeyState(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil,
		outbox.Message{ID: "p", Key: "P", Type: "T"}, outbox.Message{ID: "d", Key: "D", Type: "T"},
		outbox.Message{ID: "r", Key: "R", Type: "T"}, outbox.Message{ID: "l", Key: "L", Type: "T"},
		outbox.Message{ID: "r2", Key: "R", Type: "T"}))
	b, err := s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"p", "d", "r", "l"}, recordIDs(b.Records))
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{
		{ID: "p", Kind: backend.OutcomePublished}, {ID: "d", Kind: backend.OutcomeDead, Error: "x"},
		{ID: "r", Kind: backend.OutcomeRetry, Error: "x"}, {ID: "l", Kind: backend.OutcomeRelease},
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"p": "done", "d": "done", "r": "pending", "l": "pending", "r2": "pending"}, keyStates(t, d.DB))
	b, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"r", "l"}, recordIDs(b.Records), "r, retried, is still R's head")
}

// TestManyStaleRecordsOfOneKey: a key with more records published by
// unordered claims than one pass marks gets its pending head claimed
// within a few ordered claims, and the other keys meanwhile.
func TestManyStaleRecordsOfOneKey(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	const stale = 600
	_, err := d.DB.ExecContext(ctx, "INSERT INTO "+testTable+" (event_id, event_key, event_type, payload, status, created_at, next_attempt_at)"+
		" SELECT CONCAT('s', seq), 'K', 'T', 'p', 'published', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM seq_1_to_600")
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "head", Key: "K", Type: "T"}, outbox.Message{ID: "other", Key: "O", Type: "T"}))
	var got []string
	claims := 0
	for ; claims < 10 && len(got) < 2; claims++ {
		b, err := s.Claim(ctx, ordered)
		require.NoError(t, err)
		got = append(got, recordIDs(b.Records)...)
	}
	require.ElementsMatch(t, []string{"head", "other"}, got)
	require.LessOrEqual(t, claims, stale/256+1)
	var pendingStates int
	require.NoError(t, d.DB.QueryRow("SELECT COUNT(*) FROM "+testTable+" WHERE key_state = 'pending' AND status <> 'pending'").Scan(&pendingStates))
	require.Zero(t, pendingStates, "all marked on the way")
}

// TestOrderedClaimsGoRoundTheKeys: each ordered claim goes on after the
// last key the one before took, also when that claim went round past the
// last key to the first: every key gets its turn before any gets another.
func TestOrderedClaimsGoRoundTheKeys(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	var msgs []outbox.Message
	for _, round := range []string{"a", "b", "c"} {
		for k := range 6 {
			msgs = append(msgs, outbox.Message{ID: fmt.Sprintf("k%d%s", k, round), Key: fmt.Sprintf("k%d", k), Type: "T"})
		}
	}
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msgs...))
	p := backend.ClaimParams{Owner: "t", Limit: 4, LeaseFor: time.Minute, Ordered: true}
	for i, want := range [][]string{
		{"k0a", "k1a", "k2a", "k3a"},
		{"k4a", "k5a", "k0b", "k1b"}, // round past k5 to the first key
		{"k2b", "k3b", "k4b", "k5b"}, // on after k1, the last key taken
	} {
		b, err := s.Claim(ctx, p)
		require.NoError(t, err)
		require.ElementsMatch(t, want, recordIDs(b.Records), "claim %d", i+1)
		publish(t, s, b)
	}
}
