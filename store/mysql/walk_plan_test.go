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
