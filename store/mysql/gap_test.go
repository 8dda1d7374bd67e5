package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// The log's holes (gap.go): an id missing below a committed one is
// waited for while a transaction holds it, and passed after GapTimeout
// when nothing does; a row written into a hole after it was passed is
// still delivered, late, and counted.

// gapStore is a store whose holes are passed after timeout.
func gapStore(t *testing.T, db *sql.DB, timeout time.Duration) *mysql.Store {
	t.Helper()
	s, err := mysql.New(db, mysql.Options{Table: testTable, GapTimeout: timeout})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	return s
}

var gapLease = backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute}

func gapMsg(id string) outbox.Message {
	return outbox.Message{ID: id, Type: "T", Payload: []byte("p")}
}

// claimAll claims (and settles as published) until the claims have
// given want records or the deadline passes, and returns their IDs in
// the order they came.
func claimAll(t *testing.T, c backend.Store, want int) []string {
	t.Helper()
	ctx := context.Background()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		b, err := c.Claim(ctx, gapLease)
		require.NoError(t, err)
		if b.Len() == 0 {
			time.Sleep(max(b.RetryAfter, 5*time.Millisecond))
			continue
		}
		var os []backend.Outcome
		for _, r := range b.Records {
			got = append(got, r.ID)
			os = append(os, backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished})
		}
		_, err = c.Settle(ctx, b.Token, os)
		require.NoError(t, err)
	}
	return got
}

// A hole a transaction holds is never passed, however long it stays
// open (here ten times GapTimeout): the claims say when to come back,
// and the message it holds comes first once it commits.
func TestAHoleATransactionHoldsIsWaitedFor(t *testing.T) {
	t.Parallel()
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := gapStore(t, d.DB, 20*time.Millisecond)

	open, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = open.Rollback() }()
	require.NoError(t, s.Enqueue(ctx, open, nil, gapMsg("held")))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, gapMsg("after")))

	deadline := time.Now().Add(10 * 20 * time.Millisecond)
	claims := 0
	for claims < 3 || time.Now().Before(deadline) {
		b, err := s.Claim(ctx, gapLease)
		require.NoError(t, err)
		require.Zero(t, b.Len(), "nothing passes the held hole")
		require.NotZero(t, b.RetryAfter, "the claim says when to look again")
		claims++
	}
	require.NoError(t, open.Commit())
	require.Equal(t, []string{"held", "after"}, claimAll(t, s, 2))
	require.Zero(t, s.LateArrivals())
}

// A hole nothing holds (a rolled-back insert) is passed once GapTimeout
// has gone by since it was first seen, for the default consumer and a
// named one alike; until then the claims take nothing past it.
func TestARolledBackHoleIsPassedAfterGapTimeout(t *testing.T) {
	t.Parallel()
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := gapStore(t, d.DB, 300*time.Millisecond)
	require.NoError(t, s.AddConsumer(ctx, "audit", mysql.StartNow))
	audit, err := s.Consumer("audit")
	require.NoError(t, err)

	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, tx, nil, gapMsg("gone")))
	require.NoError(t, tx.Rollback())
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, gapMsg("after")))

	for i, c := range []backend.Store{s, audit} {
		start := time.Now()
		b, err := c.Claim(ctx, gapLease)
		require.NoError(t, err)
		var got []string
		for _, r := range b.Records {
			got = append(got, r.ID)
		}
		if b.Len() > 0 {
			_, err = c.Settle(ctx, b.Token, []backend.Outcome{{ID: "after", Kind: backend.OutcomePublished}})
			require.NoError(t, err)
		}
		if i == 0 && time.Since(start) < 300*time.Millisecond {
			// The hole was first seen by this claim: not passed yet.
			require.Empty(t, got)
			require.NotZero(t, b.RetryAfter)
		}
		got = append(got, claimAll(t, c, 1-len(got))...)
		require.Equal(t, []string{"after"}, got)
	}
	var passed int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+testTable+"_gaps WHERE passed_at IS NOT NULL").Scan(&passed))
	require.Equal(t, 2, passed, "each consumer passed the hole")
}

// A row written into a hole after the walk passed it (an insert stalled
// between taking its id and writing its row for longer than GapTimeout)
// is delivered all the same, late, and counted.
func TestARowInAPassedHoleIsDeliveredLate(t *testing.T) {
	t.Parallel()
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := gapStore(t, d.DB, 20*time.Millisecond)

	tx, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, tx, nil, gapMsg("gone")))
	require.NoError(t, tx.Rollback())
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, gapMsg("after")))
	require.Equal(t, []string{"after"}, claimAll(t, s, 1))

	var hole uint64
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT lo FROM "+testTable+"_gaps WHERE passed_at IS NOT NULL").Scan(&hole))
	_, err = d.DB.ExecContext(ctx, "INSERT INTO "+testTable+" (id, event_id, event_type, payload, created_at) VALUES (?, 'late', 'T', 'p', UTC_TIMESTAMP(6))", hole)
	require.NoError(t, err)
	require.Equal(t, []string{"late"}, claimAll(t, s, 1))
	require.Equal(t, int64(1), s.LateArrivals())
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Pending, "nothing left")
}
