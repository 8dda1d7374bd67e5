package inboxtest

import (
	"context"
	"database/sql"
	"sync"
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

// testRetentionOfHostileIDs: retention deletes exactly the old records,
// whatever their IDs: of IDs that differ only by a trailing space, case,
// a NUL or an accent's form, every other one is old, and only those go.
func testRetentionOfHostileIDs(t *testing.T, h Harness) {
	ids := hostileIDs()
	fx := newEffects(t, h, ids...)
	ib := h.New(t, "orders", nil)
	p := purger(t, h, ib)
	for i, id := range ids {
		process(t, ib, id, fx.handler(id), inbox.Processed)
		if i%2 == 0 {
			h.Backdate(t, "orders", id, 2*time.Hour)
		}
	}
	n, err := p.Purge(context.Background(), time.Hour, 3)
	require.NoError(t, err)
	require.Equal(t, (len(ids)+1)/2, n)
	for i, id := range ids {
		require.Equal(t, i%2 == 1, contains(t, ib, id), "%q", id)
	}
}

// testRetentionCountsFromCommit: a message's retention window counts from
// the commit of the transaction that recorded it, however long its
// handler ran. The handler holds its transaction open until a purge's
// cutoff has passed the moment it began; a purge runs meanwhile (and does
// not wait for the handler), the handler commits, and a redelivery is
// still a Duplicate. A purge right after the commit keeps the record;
// one a window after the commit deletes it.
func testRetentionCountsFromCommit(t *testing.T, h Harness) {
	const window = time.Second
	ctx := context.Background()
	fx := newEffects(t, h, "m-1")
	ib := h.New(t, "orders", nil)
	p := purger(t, h, ib)
	if h.Now == nil {
		t.Skip("the harness has no database clock (Harness.Now)")
	}

	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	done := make(chan outcome, 1)
	go func() {
		res, err := ib.Process(ctx, "m-1", func(ctx context.Context, tx *sql.Tx) error {
			if err := fx.handler("m-1")(ctx, tx); err != nil {
				return err
			}
			close(entered)
			<-release
			return nil
		})
		done <- outcome{id: "m-1", res: res, err: err}
	}()
	receive(t, entered, "the handler to start")
	// Everything the transaction wrote so far, it wrote before began.
	began := h.Now(t)
	awaitClock(t, h, began.Add(window))

	purged := make(chan purgeResult, 1)
	go func() {
		n, err := p.Purge(ctx, window, 100)
		purged <- purgeResult{n, err}
	}()
	var during *purgeResult
	select {
	case r := <-purged:
		during = &r
		require.NoError(t, r.err)
		require.Zero(t, r.n, "a purge while the handler's transaction is open deleted its record")
	case <-time.After(30 * time.Second):
		t.Errorf("a purge waited more than 30s for a handler's open transaction")
	}

	released := h.Now(t)
	unblock()
	out := receive(t, done, "Process to return")
	require.NoError(t, out.err)
	require.Equal(t, inbox.Processed, out.res)
	if during == nil {
		r := receive(t, purged, "the purge to return")
		require.NoError(t, r.err)
		if r.n != 0 {
			t.Errorf("the purge deleted the record of a message whose transaction had just committed")
		}
	}
	res, err := ib.Process(ctx, "m-1", fx.handler("m-1"))
	require.NoError(t, err)
	require.Equal(t, inbox.Duplicate.String(), res.String(), "a redelivery right after the commit")
	require.Equal(t, 1, fx.count(t, "m-1"), "a redelivery right after the commit applied the effect again")

	// The record was stamped after released and committed before
	// afterPurge: a purge between them less than a window after released
	// must keep it, one a window after afterPurge must delete it.
	n, err := p.Purge(ctx, window, 100)
	require.NoError(t, err)
	afterPurge := h.Now(t)
	if afterPurge.Sub(released) < window {
		require.Zero(t, n, "a purge less than the window after the commit deleted the record")
		require.True(t, contains(t, ib, "m-1"))
	} else {
		t.Logf("the machine took %v from the release to a purge, longer than the window %v: not checking that purge", afterPurge.Sub(released), window)
	}
	awaitClock(t, h, afterPurge.Add(window))
	n, err = p.Purge(ctx, window, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a purge a window after the commit must delete the record")
	process(t, ib, "m-1", fx.handler("m-1"), inbox.Processed)
}

type purgeResult struct {
	n   int
	err error
}

// awaitClock polls the database clock until it is past at, or fails t
// after a deadline.
func awaitClock(t *testing.T, h Harness, at time.Time) {
	t.Helper()
	now := h.Now(t)
	deadline := time.Now().Add(at.Sub(now) + time.Minute)
	for ; !now.After(at); now = h.Now(t) {
		if time.Now().After(deadline) {
			t.Fatalf("inboxtest: the database clock did not pass %v within a minute of it", at)
		}
		time.Sleep(10 * time.Millisecond) // polling a clock, not synchronisation
	}
}

// receive returns the next value from ch, or fails t after a deadline.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("inboxtest: waited 2 minutes for %s", what)
	}
	panic("unreachable")
}
