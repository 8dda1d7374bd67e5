package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatsAndRetentionOnAMillionPublishedRows keeps the operators'
// queries cheap where it matters: on a table with 1,000,000 published
// rows, Stats reads only the backlog, and a retention batch reads about as
// many rows as it deletes. (The table takes ~10s to fill; the test runs in
// parallel with the rest of the package.)
func TestStatsAndRetentionOnAMillionPublishedRows(t *testing.T) {
	t.Parallel()
	d, s := migrated(t, "big_outbox")
	ctx := context.Background()

	const (
		published = 1_000_000
		old       = published / 2 // published two days ago; the rest an hour ago
		pending   = 2000
		dead      = 100
	)
	fill(t, d.DB, s.table, 0, old, "published", "UTC_TIMESTAMP(6) - INTERVAL 2 DAY")
	fill(t, d.DB, s.table, old, published-old, "published", "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR")
	fill(t, d.DB, s.table, published, pending, "pending", "UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE")
	fill(t, d.DB, s.table, published+pending, dead, "dead", "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR")
	_, err := d.DB.ExecContext(ctx, "UPDATE "+s.table+" SET created_at = UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE, event_type = 'RoomGiftSent' WHERE status = 'pending' AND id % 2 = 0")
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, "ANALYZE TABLE "+s.table)
	require.NoError(t, err)

	// Stats: the backlog only.
	stats := statsSQL(s.t).text
	plan := explain(t, d.DB, stats)
	t.Logf("stats plan: %v", plan)
	require.Contains(t, []string{"idx_due", "idx_key"}, plan["key"], "index-backed")
	require.Equal(t, "range", plan["type"])
	rows, read := countReads(t, d.DB, stats, nil)
	t.Logf("stats read %d rows and index entries for %d pending and %d dead among %d published", read, pending, dead, published)
	require.Equal(t, 3, rows, "pending × 2 types, dead × 1 type")
	require.LessOrEqual(t, read, int64(2*(pending+dead)+10), "never the published history")
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, pending, st.Pending)
	require.Equal(t, dead, st.Dead)
	require.Equal(t, pending/2, st.ByType["RoomGiftSent"].Pending)
	require.InDelta(t, (10 * time.Minute).Seconds(), st.OldestPending.Seconds(), 60)

	// Retention: a call reads about what it deletes. Its window is a
	// range of idx_due in index order.
	window := strings.NewReplacer("status = ?", "status = 'published'", "INTERVAL ? MICROSECOND", "INTERVAL 86400000000 MICROSECOND",
		"next_attempt_at > ?", "next_attempt_at > '0001-01-01'", "next_attempt_at = ?", "next_attempt_at = '0001-01-01'",
		"id > ?", "id > 0", "LIMIT ?", "LIMIT 1000").Replace(purgeWindowSQL(s.t, "published", 0, purgePos{}, 0).text)
	plan = explain(t, d.DB, window)
	t.Logf("purge window plan: %v", plan)
	require.Equal(t, "idx_due", plan["key"])
	require.Equal(t, "range", plan["type"])
	require.NotContains(t, plan["Extra"], "filesort")
	n, err := s.CountPurgeable(ctx, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, old, n)
	// One connection, so that its session counters see the whole call.
	one := d.Open(t)
	one.SetMaxOpenConns(1)
	s1, err := New(one, Options{Table: s.table})
	require.NoError(t, err)
	conn, err := one.Conn(ctx)
	require.NoError(t, err)
	before := handlerReads(t, conn)
	require.NoError(t, conn.Close())
	deleted, err := s1.PurgePublished(ctx, 24*time.Hour, 1000)
	require.NoError(t, err)
	conn, err = one.Conn(ctx)
	require.NoError(t, err)
	read = handlerReads(t, conn) - before
	require.NoError(t, conn.Close())
	t.Logf("a retention call deleted %d rows reading %d rows and index entries", deleted, read)
	require.Equal(t, 1000, deleted)
	require.LessOrEqual(t, read, int64(6*1000+50), "the window, its locks, the consumer check and the two deletes: a few reads per row, never the history")

	deletedNow, err := s.PurgePublished(ctx, 24*time.Hour, 5000)
	require.NoError(t, err)
	require.Equal(t, 5000, deletedNow)
	n, err = s.CountPurgeable(ctx, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, old-6000, n)
	st, err = s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, pending, st.Pending, "retention never touches pending records")
	require.Equal(t, dead, st.Dead, "nor dead letters")
}
