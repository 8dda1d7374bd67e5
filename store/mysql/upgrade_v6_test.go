package mysql_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// version5 is the schema the store made before its state columns
// narrowed (commit 5f00856): status CHAR(9), the lease token in lease
// CHAR(16).
var version5 = oldSchema(5)

// leaseIDOf is the lease_id the upgrade to version 6 gives a version 5
// lease (as the store maps a token): a worker's 16 hex digits with the
// top bit cleared and the lowest set; a head start's ('h' and 15 hex
// digits) -1 minus their value.
func leaseIDOf(t *testing.T, lease string) string {
	t.Helper()
	if lease == "" {
		return "0"
	}
	if lease[0] == 'h' {
		n, err := strconv.ParseUint(lease[1:], 16, 64)
		require.NoError(t, err)
		return strconv.FormatInt(-1-int64(n), 10)
	}
	n, err := strconv.ParseUint(lease, 16, 64)
	require.NoError(t, err)
	return strconv.FormatUint(n&(1<<63-1)|1, 10)
}

// TestMigrateFromVersion5KeepsLeases: the records of a version 5 table,
// in the outbox table and a named consumer's, come through the upgrade to
// version 6 as they were. A worker's lease taken before it still fences
// (its holder settles with the same token, nobody else claims the record
// until it runs out), whether the token's first digit is above 7 (its
// top bit, which lease_id clears) or not; a writer's head start stays a
// head start (not counted as a worker's lease, not claimable before it
// ends); the status of each record is kept.
func TestMigrateFromVersion5KeepsLeases(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	const low, high, head = "0123456789abcdee", "f123456789abcdef", "h23456789abcdef0"
	execAll(t, d.DB, version5)
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_key, event_type, payload, status, retry_count, last_error, created_at, next_attempt_at, lease, lease_until, fanout) VALUES" +
			" ('pend', 'k1', 'T', 'p', 'pending', 0, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '', '1970-01-01 00:00:01', 1)," +
			" ('low', 'k2', 'T', 'p', 'pending', 2, 'boom', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '" + low + "', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 1)," +
			" ('high', 'k3', 'T', 'p', 'pending', 0, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '" + high + "', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 1)," +
			" ('head', 'k4', 'T', 'p', 'pending', 0, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, '" + head + "', '1970-01-01 00:00:01', 1)," +
			" ('pub', 'k5', 'T', 'p', 'published', 0, NULL, UTC_TIMESTAMP(6), '2026-01-02 03:04:05.123456', '" + low + "', UTC_TIMESTAMP(6), 1)," +
			" ('dead', 'k6', 'T', 'p', 'dead', 5, 'gave up', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '" + high + "', UTC_TIMESTAMP(6), 1)",
		"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('activity', 1, UTC_TIMESTAMP(6))",
		"INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at, lease, lease_until)" +
			" SELECT 'activity', id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at, lease, lease_until FROM room_outbox",
	})
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, st.Version, "recognised by its columns")
	err = s.Verify(ctx)
	require.ErrorContains(t, err, fmt.Sprintf("at schema version 5 and this store needs version %d", mysql.SchemaVersion))
	require.ErrorContains(t, err, "type of status (char, not enum)")
	require.ErrorContains(t, err, "the copy of the values of lease of the companion table consumption")

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)

	for _, table := range []string{"room_outbox", "room_outbox_consumption"} {
		require.Equal(t, []string{
			"pend|pending|0",
			"low|pending|" + leaseIDOf(t, low),
			"high|pending|" + leaseIDOf(t, high),
			"head|pending|" + leaseIDOf(t, head),
			"pub|published|" + leaseIDOf(t, low),
			"dead|dead|" + leaseIDOf(t, high),
		}, rowStrings(t, d.DB, "SELECT CONCAT_WS('|', event_id, status, lease_id) FROM "+table+" ORDER BY event_key"), table)
	}
	pub, err := s.Get(ctx, "pub")
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), pub.PublishedAt.UTC(), "the publication time is kept")
	stats, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, stats.Leased, "the workers' leases, not the head start")

	for _, c := range []backend.Store{s, consumer(t, s, "activity")} {
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, []string{"pend"}, recordIDs(b.Records), "the records leased before the upgrade stay leased")
		for _, tok := range []string{low, high} {
			res, err := c.Settle(ctx, tok, []backend.Outcome{{ID: "low", Kind: backend.OutcomePublished}, {ID: "high", Kind: backend.OutcomePublished}})
			require.NoError(t, err)
			require.Equal(t, backend.SettleResult{Applied: 1, Stale: 1}, res, "each lease taken before the upgrade fences its own record")
		}
		res, err := c.Settle(ctx, head, []backend.Outcome{{ID: "head", Kind: backend.OutcomePublished}})
		require.NoError(t, err)
		require.Equal(t, backend.SettleResult{Applied: 1}, res, "the head start too")
	}
}

// TestAnOlderBuildLeavesNewerTablesAlone: tables a newer build upgraded
// (recorded at a version this build does not know) are never changed by
// this build's Migrate, even where they differ from what it would make;
// when they still have what this build needs, it runs on them.
func TestAnOlderBuildLeavesNewerTablesAlone(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	next := mysql.SchemaVersion + 1
	execAll(t, d.DB, []string{fmt.Sprintf("INSERT INTO room_outbox_schema_version (version, applied_at) VALUES (%d, UTC_TIMESTAMP(6))", next)})
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: next, Recorded: true}, st)

	// The newer version changed a column this build needs.
	execAll(t, d.DB, []string{"ALTER TABLE room_outbox MODIFY status CHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending'"})
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: next, Recorded: true}, st, "nothing to run")
	for _, err := range []error{s.Migrate(ctx), s.Verify(ctx)} {
		require.ErrorContains(t, err, fmt.Sprintf("table \"room_outbox\" is at schema version %d, newer than this build's %d, and lacks type of status (char, not enum), which this build needs", next, mysql.SchemaVersion))
	}
	require.Equal(t, []string{"char"}, rowStrings(t, d.DB, "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'room_outbox' AND COLUMN_NAME = 'status'"), "not changed back")
}

// TestMigrateResumesAnInterruptedUpgradeToVersion6: an upgrade from
// version 5 that stopped after lease_id was added and filled, before
// lease was dropped and status retyped (a killed process), is still a
// version 5 table, says what it lacks, and Migrate finishes it with the
// leases kept.
func TestMigrateResumesAnInterruptedUpgradeToVersion6(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	const token = "f123456789abcdef"
	execAll(t, d.DB, version5)
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_type, payload, created_at, next_attempt_at, lease, lease_until) VALUES" +
			" ('leased', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '" + token + "', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)," +
			" ('free', 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '', '1970-01-01 00:00:01')",
	})
	upgrade, err := mysql.SchemaSQL(testTable, 5, 6)
	require.NoError(t, err)
	var ran int
	for _, st := range strings.Split(upgrade, ";\n") {
		if ran == 2 {
			break
		}
		if st = strings.TrimSpace(stripComments(st)); st != "" {
			execAll(t, d.DB, []string{st})
			ran++
		}
	}
	require.Equal(t, []string{"leased|" + leaseIDOf(t, token), "free|0"},
		rowStrings(t, d.DB, "SELECT CONCAT_WS('|', event_id, lease_id) FROM room_outbox ORDER BY id"), "the first two statements: lease_id added and filled")

	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, st.Version)
	err = s.Verify(ctx)
	require.ErrorContains(t, err, "part way through the upgrade to schema version 6: column lease_id is there but the copy of the values of lease, type of status (char, not enum) are missing",
		"the copy is idempotent and runs again: nothing tells whether it ran")

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []string{"free"}, recordIDs(b.Records), "the lease held before the upgrade still holds")
	res, err := s.Settle(ctx, token, []backend.Outcome{{ID: "leased", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	require.Equal(t, backend.SettleResult{Applied: 1}, res)
}

// stripComments drops the "--" comment lines of SQL text.
func stripComments(sqlText string) string {
	var out []string
	for _, line := range strings.Split(sqlText, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
