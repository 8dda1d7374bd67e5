package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
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
var version6 = oldSchema(6)

// version7 is the schema the store made before idx_status_key replaced
// idx_head (commit 963872d): version6 with key_state, and idx_head
// instead of idx_key.
var version7 = oldSchema(7)

// hasColumn reports whether the outbox table has the column.
func hasColumn(t *testing.T, db *sql.DB, column string) bool {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?", testTable, column).Scan(&n))
	return n > 0
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

// TestMigrateFromVersion6: the upgrade through version 7 to 8 keeps every
// row, leaves idx_status_key as the only index of ordered claims, and
// ordered claims then find the same heads as before; a dead letter
// requeued is its key's head again.
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

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)
	require.Equal(t, before, snapshot(t, d.DB), "every row and field kept")
	requireVersion9Shape(t, d.DB)

	two := ordered
	two.Limit = 2 // the heads, not k1's next one
	b, err := s.Claim(ctx, two)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"u1", "p1"}, recordIDs(b.Records), "k1's head, and the unkeyed record")
	publish(t, s, b)

	// A dead letter requeued is its key's head again, before p2.
	require.NoError(t, s.Requeue(ctx, "dead"))
	b, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"dead", "p2"}, recordIDs(b.Records), "the requeued dead letter first, p2 behind it")
}

// requireVersion9Shape checks what version 9 dropped: no delivery state
// in the outbox table, none of its indexes.
func requireVersion9Shape(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, index := range []string{"idx_status_key", "idx_head", "idx_key", "idx_due", "idx_fanout"} {
		require.False(t, hasIndex(t, db, index), index)
	}
	for _, column := range []string{"status", "retry_count", "last_error", "next_attempt_at", "fanout", "lease_id", "lease_until", "key_state", "lease", "lease_token"} {
		require.False(t, hasColumn(t, db, column), column)
	}
}

// TestMigrateFromVersion7: records an unordered worker published under
// version 7 kept key_state 'pending' and stood in idx_head until an
// ordered claim marked them, 256 per key per claim. After the upgrade an
// ordered claim takes every key's pending records, and the pending
// unkeyed ones, at once, whatever that history held; leases held during the
// upgrade ended (a record whose lease ran out is due, and the key's
// next one with it).
func TestMigrateFromVersion7(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, version7)
	execAll(t, d.DB, []string{
		"CREATE TABLE room_outbox_schema_version (version INT UNSIGNED NOT NULL, applied_at DATETIME(6) NOT NULL, PRIMARY KEY (version))",
		"INSERT INTO room_outbox_schema_version VALUES (7, UTC_TIMESTAMP(6))",
	})
	fillPublished(t, d.DB, "K", 600)
	fillPublished(t, d.DB, "", 600)
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_key, event_type, payload, status, created_at, next_attempt_at, lease_id, lease_until, key_state) VALUES" +
			" ('k-head', 'K', 'T', 'p', 'pending', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 0, '1970-01-01 00:00:01', 'pending')," +
			" ('o-leased', 'O', 'T', 'p', 'pending', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 12345, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, 'pending')," +
			" ('o-next', 'O', 'T', 'p', 'pending', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 0, '1970-01-01 00:00:01', 'pending')," +
			" ('unkeyed', '', 'T', 'p', 'pending', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 0, '1970-01-01 00:00:01', 'pending')",
	})
	before := snapshot(t, d.DB)
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	require.ErrorContains(t, s.Verify(ctx), "index idx_status_key")
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	requireVersion9Shape(t, d.DB)
	require.Equal(t, before, snapshot(t, d.DB), "every row and field kept")

	b, err := s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.Equal(t, []string{"k-head", "o-leased", "unkeyed", "o-next"}, recordIDs(b.Records), "each key's head (O's lease ran out), the unkeyed record, and O's next behind its head")
}

// fillPublished inserts n published records of key, as unordered outcomes
// left them (quickly: one INSERT … SELECT over generated numbers).
func fillPublished(t *testing.T, db *sql.DB, key string, n int) {
	t.Helper()
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	_, err := db.Exec(fmt.Sprintf("INSERT INTO room_outbox (event_id, event_key, event_type, payload, status, created_at, next_attempt_at)"+
		" SELECT CONCAT('hist-', ?, '-', n), ?, 'T', 'p', 'published', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)"+
		" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d AS n FROM %s a, %s b, %s c, %s e, %s f, %s g) nums WHERE n < ?",
		digits, digits, digits, digits, digits, digits), key, key, n)
	require.NoError(t, err)
}

// TestMigrateResumesAnInterruptedUpgradeToVersion7: tables whose upgrade
// to version 7 stopped after idx_head was added, before idx_key was
// dropped, are still version 6, and Migrate finishes the upgrade (and
// the one to version 8).
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
	require.Contains(t, st.Pending[0], "SET key_state = 'done'", "the rest of version 7 first, its copy again: %q", st.Pending)
	require.Contains(t, st.Pending[1], "DROP INDEX idx_key", "%q", st.Pending)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	require.False(t, hasIndex(t, d.DB, "idx_key"))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaVersion, st.Version)
}

// TestOrderedOutcomesKeepHeads: after an ordered claim's outcomes, a
// published or dead record no longer holds its key back, and a retried
// or released one is still its key's head.
func TestOrderedOutcomesKeepHeads(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil,
		outbox.Message{ID: "p", Key: "P", Type: "T"}, outbox.Message{ID: "d", Key: "D", Type: "T"},
		outbox.Message{ID: "r", Key: "R", Type: "T"}, outbox.Message{ID: "l", Key: "L", Type: "T"},
		outbox.Message{ID: "r2", Key: "R", Type: "T"}, outbox.Message{ID: "p2", Key: "P", Type: "T"}, outbox.Message{ID: "d2", Key: "D", Type: "T"}))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 4, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"p", "d", "r", "l"}, recordIDs(b.Records))
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{
		{ID: "p", Kind: backend.OutcomePublished}, {ID: "d", Kind: backend.OutcomeDead, Error: "x"},
		{ID: "r", Kind: backend.OutcomeRetry, Error: "x"}, {ID: "l", Kind: backend.OutcomeRelease},
	})
	require.NoError(t, err)
	b, err = s.Claim(ctx, ordered)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"p2", "d2", "r", "l"}, recordIDs(b.Records), "r, retried, is still R's head")
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

// TestMigrateResumeRunsTheCopyAgain: an upgrade to version 6 stopped
// after lease_id was added, before the leases were copied into it (a
// killed process), copies them when it resumes: the copy is idempotent,
// and nothing in the tables tells whether it ran. (Migrate used to take
// the added column for the copy done, and the record leased before the
// upgrade became claimable by others.) The cut-over to version 9 sees
// the copied lease, and waits for its worker to stop.
func TestMigrateResumeRunsTheCopyAgain(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	const token = "f123456789abcdef"
	execAll(t, d.DB, version5)
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_type, payload, created_at, next_attempt_at, lease, lease_until) VALUES" +
			" ('leased', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '" + token + "', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)," +
			" ('free', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '', '1970-01-01 00:00:01')",
		"ALTER TABLE room_outbox ADD COLUMN lease_id BIGINT NOT NULL DEFAULT 0",
	})
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	require.ErrorContains(t, s.Migrate(ctx), "1 records are leased to workers of version 8", "the lease was copied")
	migrateAfterStoppingWorkers(t, s, d.DB)
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"free", "leased"}, recordIDs(b.Records))
}
