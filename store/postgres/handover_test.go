package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

func claimIDs(t *testing.T, s backend.Store) []string {
	t.Helper()
	b, err := s.Claim(context.Background(), backend.ClaimParams{Owner: "w", Limit: 100, LeaseFor: time.Minute})
	require.NoError(t, err)
	var out []string
	for _, r := range b.Records {
		out = append(out, r.ID)
	}
	return out
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// TestHandOverNeverSkipsAnEarlierSeqCommittedLater: a message whose seq
// was taken before a later one committed reaches a named consumer,
// whichever transaction took its ID first.
func TestHandOverNeverSkipsAnEarlierSeqCommittedLater(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	require.NoError(t, s.AddConsumer(ctx, "audit", postgres.StartNow))
	c, err := s.Consumer("audit")
	require.NoError(t, err)

	// 1. The slow writer takes seq 1 (and its transaction ID) first; the
	// fast one takes seq 2 and commits. seq 2 waits for seq 1.
	slow := begin(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, slow, nil, outbox.Message{ID: "slow-1", Type: "T"}))
	enqueueCommitted(t, d, s, outbox.Message{ID: "fast-2", Type: "T"})
	require.Empty(t, claimIDs(t, c), "fast-2 waits until slow-1's transaction has ended")
	require.NoError(t, slow.Commit())
	require.ElementsMatch(t, []string{"slow-1", "fast-2"}, claimIDs(t, c))

	// 2. The slow writer's transaction ID is the older one, its seq the
	// newer: the fast one, handed over first, does not carry the cursor
	// past the slow one.
	slow = begin(t, d.DB)
	_, err = slow.ExecContext(ctx, "SELECT pg_current_xact_id()") // takes its ID now
	require.NoError(t, err)
	fast := begin(t, d.DB)
	_, err = fast.ExecContext(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, fast, nil, outbox.Message{ID: "fast-3", Type: "T"}))
	require.NoError(t, s.Enqueue(ctx, slow, nil, outbox.Message{ID: "slow-4", Type: "T"}))
	require.NoError(t, fast.Commit())
	require.Empty(t, claimIDs(t, c), "fast-3's transaction is younger than the open slow one")
	require.NoError(t, slow.Commit())
	require.ElementsMatch(t, []string{"fast-3", "slow-4"}, claimIDs(t, c))

	// 3. A rolled-back writer leaves a gap that holds nothing back.
	rolled := begin(t, d.DB)
	require.NoError(t, s.Enqueue(ctx, rolled, nil, outbox.Message{ID: "gone", Type: "T"}))
	enqueueCommitted(t, d, s, outbox.Message{ID: "after-gap", Type: "T"})
	require.NoError(t, rolled.Rollback())
	require.Equal(t, []string{"after-gap"}, claimIDs(t, c))
}

// TestHandOverIgnoresOtherDatabases: a transaction open in another
// database of the server cannot write this table, and does not hold the
// hand-over back.
func TestHandOverIgnoresOtherDatabases(t *testing.T) {
	other := pgtest.NewDatabase(t)
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	require.NoError(t, s.AddConsumer(ctx, "audit", postgres.StartNow))
	c, err := s.Consumer("audit")
	require.NoError(t, err)

	elsewhere := begin(t, other.DB)
	_, err = elsewhere.ExecContext(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	enqueueCommitted(t, d, s, outbox.Message{ID: "m", Type: "T"})
	require.Equal(t, []string{"m"}, claimIDs(t, c))
}

// TestConsumerStartsNowOrFromTheBeginning, and its removal takes its
// state.
func TestConsumerStartsNowOrFromTheBeginning(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	enqueueCommitted(t, d, s, outbox.Message{ID: "old", Type: "T"})
	require.NoError(t, s.AddConsumer(ctx, "now", postgres.StartNow))
	require.NoError(t, s.AddConsumer(ctx, "all", postgres.StartBeginning))
	cs, err := s.Consumers(ctx)
	require.NoError(t, err)
	require.True(t, cs[0].Backfilling, "all: old is still to be handed over")
	require.False(t, cs[1].Backfilling, "now: no backfill")
	require.ErrorIs(t, s.AddConsumer(ctx, "all", postgres.StartNow), postgres.ErrConsumerExists)
	require.ErrorContains(t, s.AddConsumer(ctx, "bad name", postgres.StartNow), "consumer name")
	enqueueCommitted(t, d, s, outbox.Message{ID: "new", Type: "T"})

	now, err := s.Consumer("now")
	require.NoError(t, err)
	all, err := s.Consumer("all")
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, claimIDs(t, now))
	require.Equal(t, []string{"old", "new"}, claimIDs(t, all))
	_, err = now.Get(ctx, "old")
	require.ErrorIs(t, err, outbox.ErrNotFound, "before the consumer's start")

	cs, err = s.Consumers(ctx)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.False(t, cs[0].Backfilling, "all has been handed everything")
	require.Equal(t, "all", cs[0].Name)
	require.Equal(t, int64(1), cs[0].StartSeq)
	require.Equal(t, "now", cs[1].Name)
	require.Equal(t, int64(2), cs[1].StartSeq)

	n, err := s.RemoveConsumer(ctx, "all")
	require.NoError(t, err)
	require.Zero(t, n, "a consumer keeps no row per message delivered")
	_, err = all.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Minute})
	require.ErrorIs(t, err, postgres.ErrUnknownConsumer)
	_, err = s.RemoveConsumer(ctx, "all")
	require.ErrorIs(t, err, postgres.ErrUnknownConsumer)
}

// TestRetentionWaitsForEveryConsumer: a message published by the default
// consumer stays while a named consumer has not finished it.
func TestRetentionWaitsForEveryConsumer(t *testing.T) {
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	require.NoError(t, s.AddConsumer(ctx, "audit", postgres.StartNow))
	audit, err := s.Consumer("audit")
	require.NoError(t, err)
	enqueueCommitted(t, d, s, outbox.Message{ID: "m", Type: "T"})
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{{ID: "m", Kind: backend.OutcomePublished}})
	require.NoError(t, err)

	n, err := s.CountPurgeable(ctx, time.Microsecond)
	require.NoError(t, err)
	require.Zero(t, n, "audit has not been handed it yet")
	ba, err := audit.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, ba.Len())
	n, err = s.PurgePublished(ctx, time.Microsecond, 10)
	require.NoError(t, err)
	require.Zero(t, n, "audit holds it")
	_, err = audit.Settle(ctx, ba.Token, []backend.Outcome{{ID: "m", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := s.PurgeAll(ctx, time.Microsecond, 10, 0)
		require.NoError(t, err)
		return n == 1
	}, time.Minute, 10*time.Millisecond)
	_, err = audit.Get(ctx, "m")
	require.ErrorIs(t, err, outbox.ErrNotFound)
	var left int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT count(*) FROM room_outbox_state").Scan(&left))
	require.Zero(t, left, "its consumer state went with it")
}

// TestHandOverIgnoresPreparedTransactionsOfOtherDatabases: a prepared
// transaction (PREPARE TRANSACTION) of another database cannot write
// this table either, and pg_stat_activity does not list it: it must not
// hold the hand-over back for as long as it stays prepared. The server
// must allow prepared transactions (max_prepared_transactions > 0; CI's
// servers do).
func TestHandOverIgnoresPreparedTransactionsOfOtherDatabases(t *testing.T) {
	other := pgtest.NewDatabase(t)
	d := pgtest.NewDatabase(t)
	s := newStore(t, d.DB)
	ctx := context.Background()
	var maxPrepared int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&maxPrepared))
	require.Positive(t, maxPrepared, "this test needs a server with max_prepared_transactions > 0 "+
		"(ALTER SYSTEM SET max_prepared_transactions = 64, then restart it; .ci/run does)")
	require.NoError(t, s.AddConsumer(ctx, "audit", postgres.StartNow))
	c, err := s.Consumer("audit")
	require.NoError(t, err)

	gid := "outboxrelay-test-" + d.Name
	conn, err := other.DB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, q := range []string{"BEGIN", "CREATE TABLE prepared_here (x int)", "PREPARE TRANSACTION '" + gid + "'"} {
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	t.Cleanup(func() { _, _ = other.DB.ExecContext(context.Background(), "ROLLBACK PREPARED '"+gid+"'") })

	enqueueCommitted(t, d, s, outbox.Message{ID: "m", Type: "T"})
	require.Equal(t, []string{"m"}, claimIDs(t, c), "handed over while another database's transaction stays prepared")

	// A prepared transaction of this database may hold a message: it
	// holds the hand-over back until it is committed. (PostgreSQL does
	// not prepare a transaction that notified: a two-phase writer
	// enqueues with DisableNotify.)
	quiet, err := postgres.New(d.DB, postgres.Options{Table: testTable, DisableNotify: true})
	require.NoError(t, err)
	mine, err := d.DB.Conn(ctx)
	require.NoError(t, err)
	defer mine.Close()
	_, err = mine.ExecContext(ctx, "BEGIN")
	require.NoError(t, err)
	require.NoError(t, quiet.Enqueue(ctx, mine, nil, outbox.Message{ID: "prepared", Type: "T"}))
	_, err = mine.ExecContext(ctx, "PREPARE TRANSACTION '"+gid+"-mine'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = d.DB.ExecContext(context.Background(), "ROLLBACK PREPARED '"+gid+"-mine'") })
	enqueueCommitted(t, d, s, outbox.Message{ID: "after", Type: "T"})
	require.Empty(t, claimIDs(t, c), "after waits for the prepared transaction of this database")
	_, err = d.DB.ExecContext(ctx, "COMMIT PREPARED '"+gid+"-mine'")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"prepared", "after"}, claimIDs(t, c))
}
