package mysql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// A writer's Enqueue with a named consumer's head start and that
// consumer's SettleAndClaim of a failed batch do not deadlock. The
// settle's locking read of the failed message's state row (none yet: a
// gap lock) came before the claim's lock of the consumer's row; the
// writer's insert of its head-start state row read the consumer's row
// (a shared lock, held to its commit) and then waited for that gap; the
// claim then waited for the writer. MariaDB 11.8 in CI rolled the
// writer's transaction back ("enqueue: the head start: Error 1213").
// The test runs the two transactions step by step: the settle, the
// writer until it is in its head start's insert, the claim's lock.
func TestAHeadStartEnqueueAndASettleAndClaimDoNotDeadlock(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := New(d.DB, Options{Table: "dl_outbox"})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.AddConsumer(ctx, "audit", StartBeginning))
	c, err := s.Consumer("audit")
	require.NoError(t, err)
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, backend.Message{ID: "a", Type: "T", Payload: []byte("1")}))
	b, err := c.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, b.Records, 1)
	target, err := c.resolve(ctx)
	require.NoError(t, err)

	// The consumer's SettleAndClaim, its settle first: a failed message.
	claimer, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = claimer.Rollback() }()
	_, err = settleIn(ctx, claimer, target, b.Token, []backend.Outcome{
		{ID: "a", Seq: b.Records[0].Seq, Kind: backend.OutcomeRetry, RetryIn: time.Minute, Error: "down"}})
	require.NoError(t, err)

	// A writer enqueues with the consumer's head start meanwhile.
	writer, err := d.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback() }()
	wrote := make(chan error, 1)
	go func() {
		wrote <- c.Enqueue(ctx, writer, &backend.EnqueueOptions{HeadStart: time.Minute},
			backend.Message{ID: "b", Type: "T", Payload: []byte("2")})
	}()
	var werr error
	done := false
	deadline := time.Now().Add(10 * time.Second)
	for !done && time.Now().Before(deadline) {
		select {
		case werr = <-wrote:
			done = true
		default:
			if inHeadStart(t, d.DB) {
				deadline = time.Time{} // the writer is in its head start's insert: go on
				continue
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if done {
		// The writer did not wait: nothing to deadlock on.
		require.NoError(t, werr)
		require.NoError(t, writer.Commit())
	}

	// The claim's part: the consumer's row.
	_, cerr := lockForWalk(ctx, claimer, target)
	if cerr == nil {
		cerr = claimer.Commit()
	}
	if !done {
		werr = <-wrote
		if werr == nil {
			werr = writer.Commit()
		}
	}
	require.NoError(t, cerr, "the claim")
	require.NoError(t, werr, "the writer")
}

// inHeadStart says whether a connection runs the head start's insert
// of the store's table now (the processlist: the server's lock tables
// were slow to read, seconds, while a transaction waited).
func inHeadStart(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT IGNORE INTO `dl_outbox_state`%'").Scan(&n))
	return n > 0
}
