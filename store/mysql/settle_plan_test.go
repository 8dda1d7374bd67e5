package mysql

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestSettlePlan: outcomes that carry their record's Seq are written by
// primary key; those without one are found through uk_event_id. Either
// way the statement reads only the records it names.
func TestSettlePlan(t *testing.T) {
	d, s := migrated(t, "settle_plan")
	ctx := context.Background()
	fill(t, d.DB, s.table, 0, 5_000, "pending", "UTC_TIMESTAMP(6)")
	_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE "+s.table)
	require.NoError(t, err)

	var byID, bySeq []backend.Outcome
	for i := 1_000; i < 1_100; i++ {
		id := fmt.Sprintf("plan-%d", i)
		var seq int64
		require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT id FROM "+s.table+" WHERE event_id = ?", id).Scan(&seq))
		byID = append(byID, backend.Outcome{ID: id, Kind: backend.OutcomePublished})
		bySeq = append(bySeq, backend.Outcome{ID: id, Seq: seq, Kind: backend.OutcomePublished})
	}
	for _, c := range []struct {
		outcomes []backend.Outcome
		key      string
	}{{bySeq, "PRIMARY"}, {byID, "uk_event_id"}} {
		groups, err := groupOutcomes(c.outcomes)
		require.NoError(t, err)
		require.Len(t, groups, 1)
		st := settleSQL(s.t, groups[0], 0x0123456789abcdef)
		plan := explain(t, d.DB, st.text, st.args...)
		t.Logf("%s: %v", c.key, plan)
		require.Equal(t, c.key, plan["key"])
		require.Equal(t, "range", plan["type"])
		rows, err := strconv.Atoi(plan["rows"])
		require.NoError(t, err)
		require.LessOrEqual(t, rows, 100)
	}

	_, err = groupOutcomes([]backend.Outcome{{ID: "x", Seq: -1, Kind: backend.OutcomePublished}})
	require.ErrorContains(t, err, `outcome for "x": Seq -1 is negative`)
}
