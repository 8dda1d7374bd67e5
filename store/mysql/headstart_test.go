package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestHeadStartLeasesToTheWriter: a message enqueued with a head start is
// leased to this process in the writer's transaction. HeadStartBatch
// returns it (and only while enough of the head start is left) without
// claiming; its token settles it; workers do not take it during the head
// start, and once one has, the head start's token is stale.
func TestHeadStartLeasesToTheWriter(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	// Every head start here but the last is an hour or more, so that
	// what the test sees does not depend on how fast it runs.
	require.NoError(t, s.Enqueue(ctx, d.DB, &outbox.EnqueueOptions{HeadStart: 2 * time.Hour}, outbox.Message{ID: "long", Type: "T"}, outbox.Message{ID: "long2", Type: "T"}))
	require.NoError(t, s.Enqueue(ctx, d.DB, &outbox.EnqueueOptions{HeadStart: time.Hour}, outbox.Message{ID: "brief", Type: "T"}))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "none", Type: "T"}))

	b, left, err := s.HeadStartBatch(ctx, []string{"none", "brief", "long2", "long", "unknown"}, 90*time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"long", "long2"}, recordIDs(b.Records), "only head starts with 90 minutes left, in insert order")
	require.True(t, left > 119*time.Minute && left <= 2*time.Hour, "the head start left: %v", left)
	require.True(t, strings.HasPrefix(b.Token, "h"), b.Token)
	headStart := b.Token

	w, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []string{"none"}, recordIDs(w.Records), "workers wait for the head start")
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Leased, "a head start is not counted as a worker's lease")

	res, err := s.Settle(ctx, b.Token, []backend.Outcome{{ID: "long", Kind: backend.OutcomePublished}, {ID: "long2", Kind: backend.OutcomeRelease}})
	require.NoError(t, err)
	require.Equal(t, backend.SettleResult{Applied: 2}, res)
	r, err := s.Get(ctx, "long")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPublished, r.Status)
	w, err = s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []string{"long2"}, recordIDs(w.Records), "a released record is due at once")

	// A head start that ends while the test waits.
	require.NoError(t, s.Enqueue(ctx, d.DB, &outbox.EnqueueOptions{HeadStart: 300 * time.Millisecond}, outbox.Message{ID: "short", Type: "T"}))
	var taken backend.Batch
	require.Eventually(t, func() bool {
		taken, err = s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		return taken.Len() == 1
	}, time.Minute, 10*time.Millisecond, "a worker takes the record once the head start is over")
	require.Equal(t, "short", taken.Records[0].ID)
	b, left, err = s.HeadStartBatch(ctx, []string{"short"}, 0)
	require.NoError(t, err)
	require.Zero(t, b.Len(), "the worker holds it now")
	require.Zero(t, left)
	res, err = s.Settle(ctx, headStart, []backend.Outcome{{ID: "short", Kind: backend.OutcomePublished}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Stale)
	_, _, err = s.HeadStartBatch(ctx, []string{"x"}, -time.Second)
	require.ErrorContains(t, err, "minLeft")
}

// TestPublishNowUsesTheWritersLease: with a head start that covers a
// publish and its settle at the default timeouts (as DefaultHeadStart
// does), PublishNow writes each message once (the outcome), not twice (a
// claim, then the outcome); a failed publish leaves the message due for
// the worker at once, its attempts unchanged.
func TestPublishNowUsesTheWritersLease(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	execAll(t, d.DB, []string{
		"CREATE TABLE writes (event_id VARCHAR(255) NOT NULL, lease BIGINT NOT NULL, status VARCHAR(16) NOT NULL)",
		"CREATE TRIGGER count_writes AFTER UPDATE ON " + testTable + " FOR EACH ROW INSERT INTO writes VALUES (NEW.event_id, NEW.lease_id, NEW.status)",
	})
	rec := outboxtest.NewRecorder()
	sink := outboxtest.NewFlakySink(rec, 1)
	w, err := outbox.NewWorker(s, sink, outbox.WorkerOptions{Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	// DefaultHeadStart leaves the fast path 2s beyond PublishTimeout+
	// StoreTimeout, which a loaded machine could spend between the commit
	// and PublishNow; an hour covers them whatever the machine.
	require.GreaterOrEqual(t, outbox.DefaultHeadStart, outbox.DefaultPublishTimeout+outbox.DefaultStoreTimeout)
	headStart := &outbox.EnqueueOptions{HeadStart: time.Hour}

	ok, ok2, bad := outbox.Message{ID: "ok", Type: "T", Key: "k"}, outbox.Message{ID: "ok2", Type: "T", Key: "k"}, outbox.Message{ID: "bad", Type: "T"}
	require.NoError(t, s.Enqueue(ctx, d.DB, headStart, ok, ok2))
	require.NoError(t, w.PublishNow(ctx, ok, ok2))
	require.Equal(t, 1, rec.Count("ok"))
	require.Equal(t, 1, rec.Count("ok2"), "the second message fits in the head start too")
	for _, id := range []string{"ok", "ok2"} {
		r, err := s.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, outbox.StatusPublished, r.Status, id)
	}
	require.Equal(t, []string{"ok2|published", "ok|published"}, rowStrings(t, d.DB, "SELECT CONCAT_WS('|', event_id, status) FROM writes ORDER BY event_id DESC"), "one write each: the outcome")

	require.NoError(t, s.Enqueue(ctx, d.DB, headStart, bad))
	sink.FailNext(1)
	require.ErrorIs(t, w.PublishNow(ctx, bad), outboxtest.ErrInjected)
	r, err := s.Get(ctx, "bad")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Zero(t, r.Attempts)
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []string{"bad"}, recordIDs(b.Records), "due for the worker at once")

	require.NoError(t, s.Enqueue(ctx, d.DB, &outbox.EnqueueOptions{HeadStart: time.Second}, outbox.Message{ID: "short", Type: "T"}))
	require.NoError(t, w.PublishNow(ctx, outbox.Message{ID: "short", Type: "T"}))
	require.Equal(t, []string{"short|pending", "short|published"}, rowStrings(t, d.DB, "SELECT CONCAT_WS('|', event_id, status) FROM writes WHERE event_id = 'short'"),
		"a head start too short for a publish and its settle: claimed first")
}
