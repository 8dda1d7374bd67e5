package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// TestListPlanOnAPublishedHistory keeps the dashboard's lists cheap on a
// table whose published history is long: the oldest pending record (the
// head the overview shows every few seconds) and a page of dead letters
// read about the backlog, never the published rows.
func TestListPlanOnAPublishedHistory(t *testing.T) {
	d, s := migrated(t, "list_outbox")
	ctx := context.Background()
	const (
		published = 100_000
		pending   = 500
		dead      = 50
	)
	fill(t, d.DB, s.table, 0, published, "published", "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR")
	fill(t, d.DB, s.table, published, pending, "pending", "UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE")
	fill(t, d.DB, s.table, published+pending, dead, "dead", "UTC_TIMESTAMP(6) - INTERVAL 1 HOUR")
	fill(t, d.DB, s.table, published+pending+dead, published/10, "published", "UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE") // more history after the backlog
	// A named consumer with the same history in the consumption table.
	_, err := d.DB.ExecContext(ctx, "INSERT INTO "+consumptionTable(s.table)+" (consumer, msg_id, event_id, event_key, event_type, status, created_at, next_attempt_at)"+
		" SELECT 'audit', id, event_id, event_key, event_type, status, created_at, next_attempt_at FROM "+s.table)
	require.NoError(t, err)
	for _, table := range []string{s.table, consumptionTable(s.table)} {
		_, err = d.DB.ExecContext(ctx, "ANALYZE TABLE "+table)
		require.NoError(t, err)
	}
	audit, err := s.Consumer("audit")
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		t    *target
		f    ListFilter
		want int
	}{
		{"head", s.t, ListFilter{Status: outbox.StatusPending, Limit: 1}, 1},
		{"dead page", s.t, ListFilter{Status: outbox.StatusDead, Limit: 50}, 50},
		{"failing page", s.t, ListFilter{Status: outbox.StatusPending, MinAttempts: 1, Limit: 50}, 0},
		{"consumer head", audit.t, ListFilter{Status: outbox.StatusPending, Limit: 1}, 1},
		{"consumer dead page", audit.t, ListFilter{Status: outbox.StatusDead, Limit: 50}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := listSQL(tc.t, tc.f)
			q := st.text
			for _, a := range st.args {
				lit := fmt.Sprintf("'%v'", a)
				if _, ok := a.(int); ok {
					lit = fmt.Sprint(a)
				}
				q = strings.Replace(q, "?", lit, 1)
			}
			t.Logf("plan: %v", explain(t, d.DB, q))
			n, read := countReads(t, d.DB, q, nil)
			t.Logf("read %d rows and index entries for %d rows (%d pending, %d dead, %d published)", read, n, pending, dead, published)
			require.Equal(t, tc.want, n)
			require.LessOrEqual(t, read, int64(2*(pending+dead)+10), "never the published history")
		})
	}
}
