package mysql

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWalkReadsFromThePosition keeps the walk's plan: on a log of 100,000
// delivered messages and 60 new ones, the walk reads the primary key
// from the consumer's position on, about a row per message it returns,
// not the delivered history.
func TestWalkReadsFromThePosition(t *testing.T) {
	d, s := migrated(t, "plan_outbox")
	ctx := context.Background()
	fill(t, d.DB, s.table, 0, 100_000)
	_, err := d.DB.ExecContext(ctx, "UPDATE plan_outbox_consumers SET walked = (SELECT MAX(id) FROM plan_outbox)")
	require.NoError(t, err)
	fill(t, d.DB, s.table, 100_000, 60)
	_, err = d.DB.ExecContext(ctx, "ANALYZE TABLE plan_outbox")
	require.NoError(t, err)
	var walked uint64
	require.NoError(t, d.DB.QueryRow("SELECT walked FROM plan_outbox_consumers WHERE id = 0").Scan(&walked))

	q := s.t.sql(walkSQL + "101")
	plan := explainTable(t, d.DB, "o", q, walked)
	require.Equal(t, "PRIMARY", plan["key"], "%v", plan)
	require.Equal(t, "range", plan["type"], "%v", plan)
	rows, reads := countReads(t, d.DB, q, readCommitted, walked)
	require.Equal(t, 60, rows)
	t.Logf("walk of 60 new messages past 100,000 delivered: %d rows read", reads)
	require.Less(t, reads, int64(3*rows+20), "the walk read the history")
}

// TestStateRowsDoNotSlowTheJoins: the statements that look up each
// message's state row (the walk, the claims' gates, Stats, ...) do it by
// the primary key, one probe a message, however many state rows the
// consumer has. Found by the MariaDB fault soak: with 400 to 600 state
// rows (retries and published parts after faults), MariaDB 10.11 read
// them through idx_finished, by consumer_id alone, for every message
// ("ref const, Using index; Not exists"): a walk of 100 read 60,000
// index entries, and Stats over a backlog of 3,000 ran for 37 s while
// the workers stalled beside it.
func TestStateRowsDoNotSlowTheJoins(t *testing.T) {
	d, s := migrated(t, "plan_outbox")
	ctx := context.Background()
	fill(t, d.DB, s.table, 0, 3_000)
	// 600 state rows of the default consumer, as faults leave them:
	// retries not yet due, and parts settled published.
	_, err := d.DB.ExecContext(ctx, `INSERT INTO plan_outbox_state (consumer_id, id, event_key, status, next_attempt_at, finished_at)
SELECT 0, id, event_key, IF(id % 2 = 0, 'pending', 'published'), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, IF(id % 2 = 0, '1970-01-01 00:00:01', UTC_TIMESTAMP(6))
FROM plan_outbox WHERE id <= 600`)
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, "ANALYZE TABLE plan_outbox, plan_outbox_state")
	require.NoError(t, err)

	// The walk from the start: 100 messages, each probed once.
	rows, reads := countReads(t, d.DB, s.t.sql(walkSQL+"101"), readCommitted, 0)
	require.Equal(t, 101, rows)
	t.Logf("walk of 101 messages beside 600 state rows: %d rows read", reads)
	require.Less(t, reads, int64(5*rows+50), "the walk scanned the state rows for each message")

	// Stats: the backlog of 3,000 (2,700 past the position, 300 pending state rows).
	c, err := s.position(ctx, s.t)
	require.NoError(t, err)
	st := pending(s.t, statsSQL, c)
	rows, reads = countReads(t, d.DB, st.text, readCommitted, st.args...)
	require.Equal(t, 1, rows, "one type, pending")
	t.Logf("Stats of 3,000 pending beside 600 state rows: %d rows read", reads)
	require.Less(t, reads, int64(10*3_000), "Stats scanned the state rows for each message")
}
