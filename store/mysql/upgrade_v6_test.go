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

// TestMigrateFromVersion5: the records of a version 5 table, in the
// outbox table and a named consumer's, come through the upgrade with
// their status, attempts and last error, whether a lease token's first
// digit is above 7 (its top bit, which version 6's lease_id clears) or
// not. The cut-over to version 9 waits for the leases' workers to stop;
// a writer's head start ends with it (due at once).
func TestMigrateFromVersion5(t *testing.T) {
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

	migrateAfterStoppingWorkers(t, s, d.DB)
	require.NoError(t, s.Verify(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)
	requireStates(t, ctx, s, "pend|pending|0|", "low|pending|2|boom", "high|pending|0|", "head|pending|0|", "pub|published|0|", "dead|dead|5|gave up")
	requireStates(t, ctx, consumer(t, s, "activity"), "pend|pending|0|", "low|pending|2|", "high|pending|0|", "head|pending|0|", "pub|published|0|", "dead|dead|5|")
	for _, c := range []backend.Store{s, consumer(t, s, "activity")} {
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"pend", "low", "high", "head"}, recordIDs(b.Records), "every pending record is due: the leases ended, and the head start with the cut-over")
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
	execAll(t, d.DB, []string{"ALTER TABLE room_outbox MODIFY event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"})
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: next, Recorded: true}, st, "nothing to run")
	for _, err := range []error{s.Migrate(ctx), s.Verify(ctx)} {
		require.ErrorContains(t, err, fmt.Sprintf("table \"room_outbox\" is at schema version %d, newer than this build's %d, and lacks type of event_key (varchar, not varbinary), which this build needs", next, mysql.SchemaVersion))
	}
	require.Equal(t, []string{"varchar"}, rowStrings(t, d.DB, "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'room_outbox' AND COLUMN_NAME = 'event_key'"), "not changed back")
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

	migrateAfterStoppingWorkers(t, s, d.DB)
	require.NoError(t, s.Verify(ctx))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"free", "leased"}, recordIDs(b.Records), "both pending, the lease ended with its worker")
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
