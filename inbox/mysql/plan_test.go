package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestPurgePlanIsARange: retention reads one consumer's oldest records
// through idx_processed, a range of the index alone that stops at the
// batch, whatever the table holds: other consumers' records, or mostly
// the consumer's own and half of them old (there, a DELETE … ORDER BY
// processed_at LIMIT n, its index left to the optimizer, read and sorted
// the consumer's whole primary key range for every batch, locking each
// row on the way).
func TestPurgePlanIsARange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		consumers []string
		records   int           // each, 10s apart
		window    time.Duration // of the purge, whose plan is checked
		old       int           // the records of "activity" older than the window
	}{
		{"two consumers, few old", []string{"activity", "audit"}, 2000, 14995 * time.Second, 500},
		{"one consumer, half old", []string{"activity"}, 20000, 100000 * time.Second, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testutil.NewDatabase(t)
			ctx := context.Background()
			ib := newInbox(t, d.DB, "activity")
			for _, consumer := range tc.consumers {
				insertRecords(t, d, consumer, tc.records, 0, 10*time.Second)
			}
			_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE inbox")
			require.NoError(t, err)
			plan := testutil.Explain(t, d.DB, mysql.PurgeOldestSQL(ib), "activity", tc.window.Microseconds(), 100)
			require.Equal(t, "idx_processed", plan["key"], "plan: %v", plan)
			require.Equal(t, "range", plan["type"], "plan: %v", plan)
			require.Contains(t, plan["Extra"], "Using index", "plan: %v", plan)
			require.NotContains(t, plan["Extra"], "filesort", "plan: %v", plan)
			// Records written 0 to (records-1)*10s ago: none is older than that.
			n, err := ib.Purge(ctx, time.Duration(tc.records)*10*time.Second, 100)
			require.NoError(t, err)
			require.Zero(t, n)
			// A record turns older than the window every 10s the test runs.
			n, err = ib.Purge(ctx, tc.window, 1000)
			require.NoError(t, err)
			require.InDelta(t, tc.old, n, 10, "the records older than %v, in batches of 1000", tc.window)
		})
	}
}

// insertRecords inserts n records of consumer: evt-00000 processed age
// ago, each next one apart older.
func insertRecords(t *testing.T, d *testutil.Database, consumer string, n int, age, apart time.Duration) {
	t.Helper()
	for i := 0; i < n; i += 500 {
		args := []any{}
		q := "INSERT INTO inbox (consumer, msg_id, processed_at) VALUES "
		for j := i; j < min(i+500, n); j++ {
			if j > i {
				q += ", "
			}
			q += "(?, ?, UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)"
			args = append(args, consumer, fmt.Sprintf("evt-%05d", j), (age + time.Duration(j)*apart).Microseconds())
		}
		_, err := d.DB.ExecContext(context.Background(), q, args...)
		require.NoError(t, err)
	}
}
