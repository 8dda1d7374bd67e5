package inboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// purger returns ib as a Purger, or skips t for an inbox without
// retention.
func purger(t *testing.T, h Harness, ib inbox.Inbox) Purger {
	t.Helper()
	p, ok := ib.(Purger)
	if !ok || h.Backdate == nil {
		t.Skipf("%T has no retention (Purger and Harness.Backdate)", ib)
	}
	return p
}

// testRetention: Purge deletes the records older than its window, of its
// own consumer only, and a message redelivered after its record was
// deleted is processed again (the documented limit of retention).
func testRetention(t *testing.T, h Harness) {
	ids := messageIDs(25)
	fx := newEffects(t, h, ids...)
	obs := newCounter()
	orders, audit := h.New(t, "orders", obs), h.New(t, "audit", nil)
	p := purger(t, h, orders)
	for i, id := range ids {
		process(t, orders, id, fx.handler(id), inbox.Processed)
		process(t, audit, id, fx.handler(id), inbox.Processed)
		if i < 20 {
			h.Backdate(t, "orders", id, time.Duration(2+i)*time.Hour)
			h.Backdate(t, "audit", id, time.Duration(2+i)*time.Hour)
		}
	}
	// Nothing is older than a day.
	n, err := p.Purge(context.Background(), 24*time.Hour, 100)
	require.NoError(t, err)
	require.Zero(t, n)

	n, err = p.Purge(context.Background(), time.Hour, 100)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	for i, id := range ids {
		require.Equal(t, i >= 20, contains(t, orders, id), "orders %s", id)
		require.True(t, contains(t, audit, id), "audit %s: another consumer's records stay", id)
	}
	require.Equal(t, 1, obs.get(inbox.EventPurged))

	// After the window, a redelivery runs the handler again.
	process(t, orders, ids[0], fx.handler(ids[0]), inbox.Processed)
	process(t, orders, ids[24], fx.handler(ids[24]), inbox.Duplicate)

	_, err = p.Purge(context.Background(), 0, 100)
	require.Error(t, err, "a zero window is refused")
	_, err = p.Purge(context.Background(), time.Hour, 0)
	require.Error(t, err, "a zero batch is refused")
}

// testRetentionInBatches: a Purge whose batch is smaller than the number
// of old records goes on batch after batch until they are gone.
func testRetentionInBatches(t *testing.T, h Harness) {
	ids := messageIDs(23)
	fx := newEffects(t, h, ids...)
	ib := h.New(t, "orders", nil)
	p := purger(t, h, ib)
	for _, id := range ids {
		process(t, ib, id, fx.handler(id), inbox.Processed)
	}
	for _, id := range ids[:21] {
		h.Backdate(t, "orders", id, 48*time.Hour)
	}
	n, err := p.Purge(context.Background(), 24*time.Hour, 4)
	require.NoError(t, err)
	require.Equal(t, 21, n)
	for i, id := range ids {
		require.Equal(t, i >= 21, contains(t, ib, id), id)
	}
	n, err = p.Purge(context.Background(), 24*time.Hour, 1)
	require.NoError(t, err)
	require.Zero(t, n)
}
