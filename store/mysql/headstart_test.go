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
// does), PublishNow writes each message once (the writer's settle, one
// in-place update of the message), not a claim and an outcome; a failed
// publish leaves the message due for the worker at once, its attempts
// unchanged.
func TestPublishNowUsesTheWritersLease(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	execAll(t, d.DB, []string{
		"CREATE TABLE writes (n INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(255) NOT NULL)",
		"CREATE TRIGGER count_writes AFTER UPDATE ON " + testTable + " FOR EACH ROW INSERT INTO writes (what) VALUES (CONCAT_WS('|', NEW.event_id, 'message', IF(NEW.writer_until = '1970-01-01 00:00:01', 'settled', 'held')))",
		"CREATE TRIGGER count_state_inserts AFTER INSERT ON " + testTable + "_state FOR EACH ROW INSERT INTO writes (what) VALUES (CONCAT_WS('|', (SELECT event_id FROM " + testTable + " WHERE id = NEW.id), 'state', NEW.status))",
		"CREATE TRIGGER count_state_updates AFTER UPDATE ON " + testTable + "_state FOR EACH ROW INSERT INTO writes (what) VALUES (CONCAT_WS('|', (SELECT event_id FROM " + testTable + " WHERE id = NEW.id), 'state', NEW.status))",
	})
	writes := func(id string) []string {
		t.Helper()
		return rowStrings(t, d.DB, "SELECT what FROM writes WHERE what LIKE '"+id+"|%' ORDER BY n")
	}
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
		require.Equal(t, []string{id + "|message|settled"}, writes(id), "one write: the writer's settle")
	}

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
	require.Equal(t, []string{"short|state|pending", "short|state|published"}, writes("short"),
		"a head start too short for a publish and its settle: claimed first (a state row), then settled")
}

// TestOrderedPublishWaitsForAHeldMessageWhoseHoldEnded (found by
// cmd/outboxsoak's short run with faults: 5 per-key order violations on
// the default consumer after the sink faults): a walk passed m1 while
// its writer held it (the held list); the writer's publish failed and it
// ended the hold; before any walk gave m1 a state row, the writer of m2
// (m1's key) publishes. m1 is still to be delivered: the writer's ordered
// read and an ordered claim by ID must leave m2 alone.
func TestOrderedPublishWaitsForAHeldMessageWhoseHoldEnded(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	hour := &outbox.EnqueueOptions{HeadStart: time.Hour}
	require.NoError(t, s.Enqueue(ctx, d.DB, hour, outbox.Message{ID: "m1", Key: "K", Type: "T"}))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	require.Zero(t, b.Len(), "m1 is its writer's: the walk passes it, on the held list")
	n, err := s.EndHeadStart(ctx, []string{"m1"})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, s.Enqueue(ctx, d.DB, hour, outbox.Message{ID: "m2", Key: "K", Type: "T"}))
	hb, _, err := s.OrderedHeadStartBatch(ctx, []string{"m2"}, 0)
	require.NoError(t, err)
	require.Zero(t, hb.Len(), "m1, before m2, is still to be delivered")
	byID, err := s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true, IDs: []string{"m2"}})
	require.NoError(t, err)
	require.Zero(t, byID.Len(), "nor does a claim by ID take m2")

	b, err = s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: 10, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	require.Equal(t, []string{"m1"}, recordIDs(b.Records), "the walk's next claim delivers m1 first")
}
