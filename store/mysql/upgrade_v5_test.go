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
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// version4 is the schema the store made before its state columns became
// fixed-width (commit 2656669): status VARCHAR(16), nullable lease_token,
// lease_owner and published_at.
var version4 = oldSchema(4)

// TestMigrateFromVersion4KeepsLeases: pending, leased, published and dead
// records of a version 4 table, in the outbox table and a named
// consumer's, come through the upgrade to version 5 as they were: a lease
// taken before it still fences (its holder settles, nobody else claims
// the record until it runs out; the new lease column keeps the first 16
// of its 32 digits, which the whole token still matches), and a
// published record keeps its publication time.
func TestMigrateFromVersion4KeepsLeases(t *testing.T) {
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

	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Verify(ctx))
	st, err = s.SchemaStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, mysql.SchemaStatus{Version: mysql.SchemaVersion, Recorded: true}, st)

	for _, table := range []string{"room_outbox", "room_outbox_consumption"} {
		require.Equal(t, []string{
			"pend|pending|0",
			"leased|pending|" + leaseIDOf(t, token[:16]),
			"pub|published|0",
			"dead|dead|" + leaseIDOf(t, token[:16]),
		}, rowStrings(t, d.DB, "SELECT CONCAT_WS('|', event_id, status, lease_id) FROM "+table+" ORDER BY event_id = 'dead', event_id = 'pub', event_id = 'leased', event_id"), table)
	}
	pub, err := s.Get(ctx, "pub")
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), pub.PublishedAt.UTC(), "the publication time is kept")

	for _, c := range []backend.Store{s, consumer(t, s, "activity")} {
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "new", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, []string{"pend"}, recordIDs(b.Records), "the record leased before the upgrade stays leased")
		res, err := c.Settle(ctx, token, []backend.Outcome{{ID: "leased", Kind: backend.OutcomePublished}, {ID: "dead", Kind: backend.OutcomePublished}})
		require.NoError(t, err)
		require.Equal(t, backend.SettleResult{Applied: 1, Stale: 1}, res, "the lease taken before the upgrade fences its record; a dead record is not leased")
		res, err = c.Settle(ctx, token, []backend.Outcome{{ID: "leased", Kind: backend.OutcomeRetry, Error: "again"}})
		require.NoError(t, err)
		require.Equal(t, backend.SettleResult{Stale: 1}, res, "an outcome applies once")
	}
	r, err := s.Get(ctx, "leased")
	require.NoError(t, err)
	require.Equal(t, "published", string(r.Status))
	require.Equal(t, r.NextAttemptAt, r.PublishedAt)
}

func countWhere(t *testing.T, db *sql.DB, table, cond string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE "+cond).Scan(&n))
	return n
}
