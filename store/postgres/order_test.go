package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// A named consumer is handed messages in the order of their writers'
// transaction IDs, which is not the order of a key's messages: a writer
// that took its transaction ID early (it wrote something else first),
// then waited for the key's row lock, writes the key's next message
// after the one that held the lock, under an older transaction ID. These
// tests put such a pair on each side of what one hand-over can move and
// check that an ordered named consumer still delivers the key's messages
// in enqueue order.

// xidFirst begins a transaction on db and makes it take its transaction
// ID now.
func xidFirst(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx := begin(t, db)
	_, err := tx.ExecContext(context.Background(), "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	return tx
}

// others commits n unkeyed messages, 100 per transaction.
func others(t *testing.T, d *pgtest.Database, s *postgres.Store, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		var batch []outbox.Message
		for j := i; j < min(n, i+100); j++ {
			batch = append(batch, outbox.Message{ID: fmt.Sprintf("%s-%d", prefix, j), Type: "T"})
		}
		enqueueCommitted(t, d, s, batch...)
	}
}

// drainOrdered claims c's records with Ordering until none is left, each
// batch settled as published, and returns the IDs of key's records in the
// order they were claimed.
func drainOrdered(t *testing.T, c backend.Store, key string, want int) []string {
	t.Helper()
	ctx := context.Background()
	var got []string
	deadline := time.Now().Add(time.Minute)
	total := 0
	for total < want {
		require.False(t, time.Now().After(deadline), "drained %d of %d records", total, want)
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 100, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		var outcomes []backend.Outcome
		for _, r := range b.Records {
			if r.Key == key {
				got = append(got, r.ID)
			}
			outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		if len(outcomes) > 0 {
			res, err := c.Settle(ctx, b.Token, outcomes)
			require.NoError(t, err)
			require.Equal(t, len(outcomes), res.Applied)
		}
		total += len(outcomes)
	}
	return got
}

// TestNamedConsumerKeepsKeyOrderPastAHandOverBatch is the case:
// 1,100 messages of other writers lie between the two messages of
// room-1 in hand-over order, more than one hand-over moves.
func TestNamedConsumerKeepsKeyOrderPastAHandOverBatch(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	require.NoError(t, s.AddConsumer(ctx, "activity", postgres.StartNow))
	c, err := s.Consumer("activity")
	require.NoError(t, err)

	a := xidFirst(t, d.DB) // writer A takes its transaction ID first
	others(t, d, s, "other", 1100)
	enqueueCommitted(t, d, s, outbox.Message{ID: "room-1-first", Key: "room-1", Type: "T"}) // writer B
	require.NoError(t, s.Enqueue(ctx, a, nil, outbox.Message{ID: "room-1-second", Key: "room-1", Type: "T"}))
	require.NoError(t, a.Commit())

	require.Equal(t, []string{"room-1-first", "room-1-second"}, drainOrdered(t, c, "room-1", 1102))
}

// TestNamedConsumerKeepsKeyOrderPastAnOpenTransaction: no hand-over
// limit is reached, but an unrelated transaction, open between the two
// writers' transaction IDs, holds the later-committed message of the
// key (writer B's) back while writer A's is handed over.
func TestNamedConsumerKeepsKeyOrderPastAnOpenTransaction(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	require.NoError(t, s.AddConsumer(ctx, "activity", postgres.StartNow))
	c, err := s.Consumer("activity")
	require.NoError(t, err)

	a := xidFirst(t, d.DB)
	unrelated := xidFirst(t, d.DB)
	enqueueCommitted(t, d, s, outbox.Message{ID: "room-1-first", Key: "room-1", Type: "T"})
	require.NoError(t, s.Enqueue(ctx, a, nil, outbox.Message{ID: "room-1-second", Key: "room-1", Type: "T"}))
	require.NoError(t, a.Commit())

	// While the unrelated transaction is open, room-1-second may be
	// handed over, but must not go out before room-1-first.
	b, err := c.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 100, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	for _, r := range b.Records {
		require.NotEqual(t, "room-1-second", r.ID, "room-1-second claimed while room-1-first waits for hand-over")
	}
	require.NoError(t, unrelated.Rollback())
	var outcomes []backend.Outcome
	for _, r := range b.Records {
		outcomes = append(outcomes, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomeRelease})
	}
	if len(outcomes) > 0 {
		_, err = c.Settle(ctx, b.Token, outcomes)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"room-1-first", "room-1-second"}, drainOrdered(t, c, "room-1", 2))
}

// TestBackfillKeepsKeyOrder: a consumer added from the beginning is
// handed the history in the same (transaction ID, seq) order, in several
// hand-overs; the key's messages still go out in enqueue order.
func TestBackfillKeepsKeyOrder(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()

	a := xidFirst(t, d.DB)
	others(t, d, s, "other", 1100)
	enqueueCommitted(t, d, s, outbox.Message{ID: "room-1-first", Key: "room-1", Type: "T"})
	require.NoError(t, s.Enqueue(ctx, a, nil, outbox.Message{ID: "room-1-second", Key: "room-1", Type: "T"}))
	require.NoError(t, a.Commit())

	require.NoError(t, s.AddConsumer(ctx, "audit", postgres.StartBeginning))
	c, err := s.Consumer("audit")
	require.NoError(t, err)
	require.Equal(t, []string{"room-1-first", "room-1-second"}, drainOrdered(t, c, "room-1", 1102))
}
