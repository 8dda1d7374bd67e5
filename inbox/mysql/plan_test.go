package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestPurgePlanIsARange: retention reads one consumer's oldest records
// through idx_processed, a range that stops at the batch, however many
// records the table holds.
func TestPurgePlanIsARange(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "activity")
	for _, consumer := range []string{"activity", "audit"} {
		for i := 0; i < 2000; i += 500 {
			args := []any{}
			q := "INSERT INTO inbox (consumer, msg_id, processed_at) VALUES "
			for j := i; j < i+500; j++ {
				if j > i {
					q += ", "
				}
				// Ten seconds apart, so that the purges below have seconds
				// to spare on a slow machine (a second apart, a purge
				// that came 0.5 s late took one record too many).
				q += "(?, ?, UTC_TIMESTAMP(6) - INTERVAL ? SECOND)"
				args = append(args, consumer, fmt.Sprintf("evt-%05d", j), 10*j)
			}
			_, err := d.DB.ExecContext(ctx, q, args...)
			require.NoError(t, err)
		}
	}
	_, err := d.DB.ExecContext(ctx, "ANALYZE TABLE inbox")
	require.NoError(t, err)
	plan := testutil.Explain(t, d.DB, "DELETE FROM inbox WHERE consumer = ? AND processed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY processed_at LIMIT ?",
		"activity", (6 * time.Hour).Microseconds(), 100)
	require.Equal(t, "idx_processed", plan["key"], "plan: %v", plan)
	require.Equal(t, "range", plan["type"], "plan: %v", plan)
	n, err := ib.Purge(ctx, 6*time.Hour, 100)
	require.NoError(t, err)
	// Records 21600s old and older, of 2000 written 0 to 19990s ago: none.
	require.Zero(t, n)
	n, err = ib.Purge(ctx, 14995*time.Second, 100)
	require.NoError(t, err)
	require.Equal(t, 500, n, "15000s to 19990s old, in batches of 100")
}
