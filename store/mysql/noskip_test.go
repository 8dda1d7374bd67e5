package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// A multi-row Enqueue reserves the AUTO_INCREMENT values of all its rows
// at its first row, then inserts the rows one by one: while it is
// between two rows, a later writer's message may commit above an ID that
// has no row yet and no lock on it (LOG-DESIGN.md, F2). A store
// that reads the outbox past a position must not pass that ID. A test
// trigger holds the second row back for a second.
func TestGapOfAMultiRowInsertIsNotSkipped(t *testing.T) {
	t.Parallel()
	d := testutil.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TRIGGER hold_slow BEFORE INSERT ON "+testTable+
		" FOR EACH ROW BEGIN IF NEW.event_id = 'slow' THEN DO SLEEP(1); END IF; END")
	require.NoError(t, err)

	msg := func(id string) outbox.Message { return outbox.Message{ID: id, Type: "T", Payload: []byte("p")} }
	first := make(chan error, 1)
	go func() {
		tx, err := d.DB.BeginTx(ctx, nil)
		if err != nil {
			first <- err
			return
		}
		if err := s.Enqueue(ctx, tx, nil, msg("fast"), msg("slow")); err != nil {
			_ = tx.Rollback()
			first <- err
			return
		}
		first <- tx.Commit()
	}()
	// The first writer is inside its INSERT, between its rows.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, d.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND STATE = 'User sleep'`).Scan(&n))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, msg("after")))

	got := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		var outcomes []backend.Outcome
		for _, r := range b.Records {
			got[r.ID]++
			outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		if b.Len() > 0 {
			_, err = s.Settle(ctx, b.Token, outcomes)
			require.NoError(t, err)
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, <-first)
	require.Equal(t, map[string]int{"fast": 1, "slow": 1, "after": 1}, got)
}
