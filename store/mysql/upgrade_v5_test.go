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

// version4 is the schema the store made before its state columns became
// fixed-width (commit 2656669): status VARCHAR(16), nullable lease_token,
// lease_owner and published_at.
var version4 = oldSchema(4)

// TestMigrateFromVersion4: pending, leased, published and dead records
// of a version 4 table, in the outbox table and a named consumer's, come
// through the upgrade to the current version with their status, attempts
// and last error; the cut-over to version 9 waits for the workers that
// hold leases to stop, and a record leased before it is due when its
// lease was to end.
func TestMigrateFromVersion4(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	const token = "0123456789abcdef0123456789abcdef"
	execAll(t, d.DB, version4)
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox (event_id, event_key, event_type, payload, status, retry_count, last_error, created_at, next_attempt_at, published_at, lease_owner, lease_token, fanout) VALUES" +
			" ('pend', 'k1', 'T', 'p', 'pending', 0, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, NULL, NULL, NULL, 1)," +
			" ('leased', 'k2', 'T', 'p', 'pending', 2, 'boom', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, NULL, 'node-é', '" + token + "', 1)," +
			" ('pub', 'k3', 'T', 'p', 'published', 0, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '2026-01-02 03:04:05.123456', NULL, NULL, 1)," +
			" ('dead', 'k4', 'T', 'p', 'dead', 5, 'gave up', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), NULL, 'node', '" + token[:31] + "f', 1)",
		"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('activity', 1, UTC_TIMESTAMP(6))",
		"INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at, published_at, lease_owner, lease_token)" +
			" SELECT 'activity', id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at, published_at, lease_owner, lease_token FROM room_outbox",
	})
	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	st, err := s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, st.Version, "recognised by its columns")
	var retypes []string
	for _, ddl := range st.Pending {
		if strings.Contains(ddl, " MODIFY status ") {
			retypes = append(retypes, ddl)
		}
	}
	require.Len(t, retypes, 2, "status is retyped once per table, not once per version: %q", retypes)
	for _, ddl := range retypes {
		require.Contains(t, ddl, "MODIFY status ENUM(", "to the current type")
	}
	err = s.Verify(ctx)
	require.ErrorContains(t, err, fmt.Sprintf("at schema version 4 and this store needs version %d", mysql.SchemaVersion))
	require.ErrorContains(t, err, "type of status (varchar, not char)")
	require.ErrorContains(t, err, "the removal of column lease_owner")
	require.ErrorContains(t, err, "the copy of the values of lease_token of the companion table consumption")

	migrateAfterStoppingWorkers(t, s, d.DB)
	require.NoError(t, s.Verify(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)
	requireStates(t, ctx, s, "pend|pending|0|", "leased|pending|2|boom", "pub|published|0|", "dead|dead|5|gave up")
	requireStates(t, ctx, consumer(t, s, "activity"), "pend|pending|0|", "leased|pending|2|", "pub|published|0|", "dead|dead|5|")
	for _, c := range []backend.Store{s, consumer(t, s, "activity")} {
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, []string{"pend"}, recordIDs(b.Records), "the record leased before the upgrade is due when that lease was to end")
	}
}

// migrateAfterStoppingWorkers runs Migrate as an operator upgrading to
// version 9 does: it refuses to cut over while records are leased to
// workers of version 8; the operator stops them (here: their leases end)
// and runs it again.
func migrateAfterStoppingWorkers(t *testing.T, s *mysql.Store, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	err := s.Migrate(ctx)
	if err == nil {
		return
	}
	require.ErrorContains(t, err, "leased to workers of version 8: stop them")
	for _, table := range []string{"room_outbox", "room_outbox_consumption"} {
		_, err := db.ExecContext(ctx, "UPDATE "+table+" SET lease_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE lease_until > UTC_TIMESTAMP(6)")
		require.NoError(t, err)
	}
	require.NoError(t, s.Migrate(ctx))
}

// requireStates checks each record of q as "id|status|attempts|last error".
func requireStates(t *testing.T, ctx context.Context, q interface {
	Get(context.Context, string) (outbox.Record, error)
}, want ...string) {
	t.Helper()
	for _, w := range want {
		id, _, _ := strings.Cut(w, "|")
		r, err := q.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, w, fmt.Sprintf("%s|%s|%d|%s", r.ID, r.Status, r.Attempts, r.LastError))
	}
}

func countWhere(t *testing.T, db *sql.DB, table, cond string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE "+cond).Scan(&n))
	return n
}
