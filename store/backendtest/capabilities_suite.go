package backendtest

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// tracingStore is what a service wraps its store in (for tracing, say):
// it embeds the store and has only Claim and Settle of its own.
type tracingStore struct {
	backend.Store
	claims, settles atomic.Int32
}

func (s *tracingStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.Batch, error) {
	s.claims.Add(1)
	return s.Store.Claim(ctx, p)
}

func (s *tracingStore) Settle(ctx context.Context, token string, o []backend.Outcome) (backend.SettleResult, error) {
	s.settles.Add(1)
	return s.Store.Settle(ctx, token, o)
}

// testDecoratedStoreKeepsFastPaths: a store wrapped in a decorator that
// embeds it can do what the store can (backend.CapabilitiesOf), and the
// worker takes the fast paths through it: the after-commit publish calls
// the sink under the writer's head start, without a claim (ordered or
// not), and a backlog's batches are settled and claimed in one call.
// (Before the capabilities were a method of the store, the worker found
// them by type assertion, which a decorator hides: every publish
// claimed, and every batch was settled on its own.)
func testDecoratedStoreKeepsFastPaths(t *testing.T, h Harness) {
	ctx := context.Background()
	inner := backend.CapabilitiesOf(h.Store)
	d := &tracingStore{Store: h.Store}
	got := backend.CapabilitiesOf(d)
	require.Equal(t, inner.Outbox, got.Outbox, "Outbox")
	require.Equal(t, inner.Consumer, got.Consumer, "Consumer")
	require.Equal(t, inner.SettleAndClaim != nil, got.SettleAndClaim != nil, "SettleAndClaim")
	require.Equal(t, inner.HeadStart != nil, got.HeadStart != nil, "HeadStart")
	require.Equal(t, inner.OrderedHeadStart != nil, got.OrderedHeadStart != nil, "OrderedHeadStart")
	require.Equal(t, inner.EndHeadStart != nil, got.EndHeadStart != nil, "EndHeadStart")
	require.Equal(t, inner.Purge != nil, got.Purge != nil, "Purge")
	require.Equal(t, inner.Transactions != nil, got.Transactions != nil, "Transactions")
	if inner.Transactions != nil {
		// The writer's Do begins on the store's database through the
		// decorator, and its after-commit publish delivers.
		rec := outboxtest.NewRecorder()
		writer, err := outbox.NewWriter(d, newWorker(t, d, rec, outbox.WorkerOptions{}))
		require.NoError(t, err)
		sent, err := writer.Do(ctx, func(context.Context, *sql.Tx) ([]outbox.Message, error) {
			return []outbox.Message{{ID: "tx-do", Key: "k", Type: "T"}}, nil
		})
		require.NoError(t, err)
		require.Len(t, sent, 1)
		require.Equal(t, 1, rec.Len(), "published after the commit")
	}

	for _, ordered := range []bool{false, true} {
		if (!ordered && inner.HeadStart == nil) || (ordered && inner.OrderedHeadStart == nil) {
			continue
		}
		rec := outboxtest.NewRecorder()
		w := newWorker(t, d, rec, outbox.WorkerOptions{Ordering: ordered})
		m := outbox.Message{ID: "hs-" + map[bool]string{false: "u", true: "o"}[ordered], Key: "k", Type: "T"}
		enqueue(t, h, outbox.EnqueueOptions{HeadStart: w.HeadStart()}, m)
		before := d.claims.Load()
		require.NoError(t, w.PublishNow(ctx, m))
		require.Equal(t, 1, rec.Count(m.ID))
		require.Equal(t, before, d.claims.Load(), "ordered %v: the after-commit publish claimed, through the decorator", ordered)
	}

	if inner.SettleAndClaim == nil {
		return
	}
	const batches = 4
	ms := msgs("sc", 2*batches)
	enqueue(t, h, outbox.EnqueueOptions{}, ms...)
	rec := outboxtest.NewRecorder()
	w := newWorker(t, d, rec, outbox.WorkerOptions{BatchSize: 2})
	settles := d.settles.Load()
	stop := runWorker(t, w)
	waitPublished(t, h.Store, ms)
	stop()
	require.Less(t, d.settles.Load()-settles, int32(batches), "every batch was settled on its own: no SettleAndClaim through the decorator")
}
