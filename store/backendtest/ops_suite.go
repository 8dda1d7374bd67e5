package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// statsOf returns the stats of s, or skips t for a store that does not
// report them.
func statsOf(t *testing.T, s backend.Store) backend.Stats {
	t.Helper()
	st, err := storeAs[backend.StatsReader](t, s, "report stats").Stats(context.Background())
	require.NoError(t, err)
	return st
}

func testStats(t *testing.T, h Harness) {
	require.Zero(t, statsOf(t, h.Store).Pending)
	enqueue(t, h, outbox.EnqueueOptions{}, outbox.Message{ID: "old", Type: "A", CreatedAt: time.Now().Add(-time.Hour)},
		outbox.Message{ID: "a2", Type: "A"}, outbox.Message{ID: "b1", Type: "B"}, outbox.Message{ID: "b2", Type: "B"})
	b := claim(t, h.Store, 2, time.Minute) // old and a2, leased
	require.Len(t, b.Records, 2)
	settle(t, h.Store, b.Token, backend.Outcome{ID: "a2", Kind: backend.OutcomeDead, Error: "x"})

	st := statsOf(t, h.Store)
	require.Equal(t, 3, st.Pending)
	require.Equal(t, 1, st.Leased, "old is still in flight")
	require.Equal(t, 1, st.Dead)
	require.Equal(t, backend.TypeStats{Pending: 1, Dead: 1}, st.ByType["A"])
	require.Equal(t, backend.TypeStats{Pending: 2}, st.ByType["B"])
	// Ages are on the store's clock: the hour the writer claims for "old"
	// does not make it an hour old.
	require.Positive(t, st.OldestPending)
	require.Less(t, st.OldestPending, 10*time.Minute)
	require.Equal(t, time.Hour, get(t, h.Store, "a2").EnqueuedAt.Sub(get(t, h.Store, "old").CreatedAt).Round(time.Hour),
		"the writer's time is kept as it was given")
}

func testObserver(t *testing.T, h Harness) {
	enqueue(t, h, outbox.EnqueueOptions{}, msg("ok"), msg("retry"), msg("poison"))
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailIf(func(m outbox.Message) error {
		switch m.ID {
		case "retry":
			return errors.New("busy")
		case "poison":
			return outbox.Permanent(errors.New("never"))
		}
		return nil
	})
	log := &eventLog{}
	fs := &faultyStore{Store: h.Store}
	w := newWorker(t, fs, sink, outbox.WorkerOptions{Name: "obs", Observer: log, Retry: outbox.FixedInterval{Interval: time.Hour}})
	processBatch(t, w)
	fs.failClaims.Store(1)
	_, err := w.ProcessBatch(context.Background())
	require.Error(t, err)

	require.Equal(t, map[outbox.EventKind]int{
		outbox.EventPublished: 1, outbox.EventPublishFailed: 2, outbox.EventDead: 1, outbox.EventClaimFailed: 1,
	}, log.kinds())
	for _, e := range log.events {
		require.Equal(t, "obs", e.Worker)
		if e.Kind == outbox.EventPublished {
			require.Equal(t, "ok", e.Record.ID)
			require.Equal(t, outbox.PathWorker, e.Path)
			require.Positive(t, e.Latency)
		}
		if e.Kind == outbox.EventDead {
			require.Equal(t, "poison", e.Record.ID)
			require.Equal(t, outbox.StatusDead, e.Record.Status)
		}
	}
}

func testRetention(t *testing.T, h Harness) {
	storeAs[backend.Purger](t, h.Store, "purge")
	enqueue(t, h, outbox.EnqueueOptions{}, msg("p1"), msg("p2"), msg("poison"))
	sink := outboxtest.NewFlakySink(outboxtest.NewRecorder(), 1)
	sink.FailIf(func(m outbox.Message) error {
		if m.ID == "poison" {
			return outbox.Permanent(errors.New("never"))
		}
		return nil
	})
	w := newWorker(t, h.Store, sink, outbox.WorkerOptions{})
	require.Equal(t, 2, processBatch(t, w).Published)
	enqueue(t, h, outbox.EnqueueOptions{HeadStart: time.Hour}, msg("waiting"))

	log := &eventLog{}
	retaining := newWorker(t, h.Store, sink, outbox.WorkerOptions{
		Retention: time.Millisecond, RetentionInterval: 20 * time.Millisecond, Observer: log,
	})
	runWorker(t, retaining)
	outboxtest.Eventually(t, "the published records are purged", func() bool {
		_, err1 := h.Store.Get(context.Background(), "p1")
		_, err2 := h.Store.Get(context.Background(), "p2")
		return errors.Is(err1, outbox.ErrNotFound) && errors.Is(err2, outbox.ErrNotFound)
	})
	require.Equal(t, outbox.StatusDead, get(t, h.Store, "poison").Status, "dead letters are never purged")
	require.Equal(t, outbox.StatusPending, get(t, h.Store, "waiting").Status, "nor pending records")
	// The worker reports a purge after its delete has committed, so the
	// event may come a moment after the records are gone.
	outboxtest.Eventually(t, "the purge is reported", func() bool { return log.kinds()[outbox.EventPurged] > 0 })
}
